// Placement: which rank (and optionally which device) holds one shard.
//
// The grammar is shardkit's own and stricter than PyTorch's `_remote_device` (see
// docs/architecture.md, "JSON formats", placements):
//
//   placement := "rank:" R | "rank:" R "/" device
//   R         := ASCII digits, no leading zeros ("0" itself is fine), < 2^31
//   device    := "cpu" | "cuda" | "cuda:" N          (N like R)
//
// A placement without a device means "the rank's default device for the backend" and is kept as
// written. Worker names (PyTorch RPC), device-only strings, `meta`, `cpu:0` and everything else
// are rejected. Because the grammar has exactly one spelling per value, ToString() reproduces the
// parsed text byte for byte ("placements as written" in the canonical form).
//
//   SHARDKIT_ASSIGN_OR_RETURN(Placement p, Placement::Parse("rank:1/cuda:0"));
//   p.rank();        // 1
//   p.ToString();    // "rank:1/cuda:0"
#ifndef SHARDKIT_SPECS_PLACEMENT_H_
#define SHARDKIT_SPECS_PLACEMENT_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/tensor/device.h"

namespace shardkit::specs {

// Ranks in placements are ranks within the communicator the spec is applied to.
inline constexpr int64_t kMaxRank = 0x7fffffff;

// The largest world size a spec, plan or shard index is bound to (2^20 ranks; also the most
// `shardkit launch --world` accepts). {"ranks": "all"} expands to one placement per rank and a
// replicated parameter has one shard per rank, so this bounds those lists (tens of MiB), whatever
// number an input claims. A placement may still name a rank up to kMaxRank: binding it to a world
// then reports it outside that world.
inline constexpr int64_t kMaxWorldSize = int64_t{1} << 20;

// Errors: kInvalidArgument if `world_size` is outside [1, kMaxWorldSize].
[[nodiscard]] absl::Status ValidateWorldSize(int64_t world_size);

class Placement {
 public:
  // Errors: kInvalidArgument naming the string and what is wrong with it.
  [[nodiscard]] static absl::StatusOr<Placement> Parse(std::string_view text);

  // `rank` must be in [0, kMaxRank] (checked: a violation is a bug in the caller).
  static Placement ForRank(int64_t rank, std::optional<Device> device = std::nullopt);

  int64_t rank() const { return rank_; }
  // nullopt: the rank's default device for the backend.
  const std::optional<Device>& device() const { return device_; }

  // "rank:R" or "rank:R/device".
  std::string ToString() const;

  friend bool operator==(const Placement& a, const Placement& b) {
    return a.rank_ == b.rank_ && a.device_ == b.device_;
  }
  friend bool operator!=(const Placement& a, const Placement& b) { return !(a == b); }

 private:
  Placement(int64_t rank, std::optional<Device> device) : rank_(rank), device_(device) {}

  int64_t rank_ = 0;
  std::optional<Device> device_;
};

// Parses a rank written as ASCII digits without leading zeros, at most kMaxRank. Shared by the
// placement grammar and the "a..b" ranks shorthand. Returns nullopt if `digits` is not one.
std::optional<int64_t> ParseRankDigits(std::string_view digits);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_PLACEMENT_H_
