// Fingerprints: SHA-256 (OpenSSL's libcrypto) of canonical JSON bytes, printed
// "sha256:<64 lowercase hex>". Stable across processes, machines and runs (unlike absl::Hash),
// so ranks can compare them.
//
//   std::string fp = Fingerprint(CanonicalJson(spec));   // "sha256:3f1c..."
#ifndef SHARDKIT_SPECS_FINGERPRINT_H_
#define SHARDKIT_SPECS_FINGERPRINT_H_

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace shardkit::specs {

using Sha256Digest = std::array<uint8_t, 32>;

// Aborts only if libcrypto itself fails (an environment bug, not an input error).
Sha256Digest Sha256(std::string_view bytes);

// "sha256:" followed by the digest in lowercase hex.
std::string FormatFingerprint(const Sha256Digest& digest);

// FormatFingerprint(Sha256(bytes)).
std::string Fingerprint(std::string_view bytes);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_FINGERPRINT_H_
