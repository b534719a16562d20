#include "backends/control_mesh/internal/mesh_marker.h"

#include <cstring>

#include "absl/strings/str_cat.h"

namespace shardkit::internal {
namespace {

constexpr uint32_t kMarkerMagic = 0x4b4dffff;  // bytes ff ff 'M' 'K'

struct Wire {
  uint32_t magic;
  char kind;
  char pad[3];
  uint64_t call;
};
static_assert(sizeof(Wire) == kMeshMarkerSize);

}  // namespace

std::string EncodeMarker(const MeshMarker& marker) {
  Wire wire{};
  wire.magic = kMarkerMagic;
  wire.kind = marker.kind;
  wire.call = marker.call;
  return std::string(reinterpret_cast<const char*>(&wire), sizeof(wire));
}

std::optional<MeshMarker> ParseMarker(const void* bytes, size_t size) {
  if (size != kMeshMarkerSize) return std::nullopt;
  Wire wire;
  std::memcpy(&wire, bytes, sizeof(wire));
  if (wire.magic != kMarkerMagic ||
      (wire.kind != MeshMarker::kGoodbye && wire.kind != MeshMarker::kGaveUp)) {
    return std::nullopt;
  }
  return MeshMarker{wire.kind, wire.call};
}

std::string DescribeMarker(int peer, const MeshMarker& marker) {
  if (marker.kind == MeshMarker::kGoodbye) {
    return absl::StrCat("rank ", peer,
                        " closed its communicator (it is not taking part in this operation)");
  }
  return absl::StrCat("rank ", peer, " gave up on operation ", marker.call, " (see its own error)");
}

}  // namespace shardkit::internal
