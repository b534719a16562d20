#include "specs/fingerprint.h"

#include <openssl/evp.h>

#include "core/base/check.h"

namespace shardkit::specs {

Sha256Digest Sha256(std::string_view bytes) {
  Sha256Digest digest{};
  unsigned int length = 0;
  const int ok = EVP_Digest(bytes.data(), bytes.size(), digest.data(), &length, EVP_sha256(),
                            /*impl=*/nullptr);
  SHARDKIT_CHECK(ok == 1 && length == digest.size()) << "EVP_Digest(sha256) failed";
  return digest;
}

std::string FormatFingerprint(const Sha256Digest& digest) {
  constexpr char kHex[] = "0123456789abcdef";
  std::string out = "sha256:";
  for (uint8_t byte : digest) {
    out.push_back(kHex[byte >> 4]);
    out.push_back(kHex[byte & 0xf]);
  }
  return out;
}

std::string Fingerprint(std::string_view bytes) { return FormatFingerprint(Sha256(bytes)); }

}  // namespace shardkit::specs
