#include "backends/socket_mesh/internal/mesh_marker.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "backends/socket_mesh/socket_mesh.h"

namespace shardkit::internal {
namespace {

constexpr uint32_t kMarkerMagic = 0x4b4dffff;  // bytes ff ff 'M' 'K'

struct Wire {
  uint32_t magic;
  char kind;
  uint8_t cause[3];  // cause + 1, little-endian; 0: none known
  uint64_t call;
};
static_assert(sizeof(Wire) == kMeshMarkerSize);

void EncodeCause(int cause, uint8_t (&bytes)[3]) {
  const bool valid =
      cause >= 0 && (cause & ~(MeshMarker::kClosedFlag | MeshMarker::kStalledFlag |
                               MeshMarker::kInterruptedFlag)) <= MeshMarker::kMaxCause;
  const uint32_t value = valid ? cause + 1 : 0;
  for (int i = 0; i < 3; ++i) bytes[i] = static_cast<uint8_t>(value >> (8 * i));
}

int DecodeCause(const uint8_t (&bytes)[3]) {
  uint32_t value = 0;
  for (int i = 0; i < 3; ++i) value |= static_cast<uint32_t>(bytes[i]) << (8 * i);
  return static_cast<int>(value) - 1;
}

}  // namespace

std::string EncodeMarker(const MeshMarker& marker) {
  Wire wire{};
  wire.magic = kMarkerMagic;
  wire.kind = marker.kind;
  EncodeCause(marker.cause, wire.cause);
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
  return MeshMarker{wire.kind, wire.call, DecodeCause(wire.cause)};
}

std::string DescribeMarker(int peer, const MeshMarker& marker) {
  if (marker.kind == MeshMarker::kGoodbye) {
    return absl::StrCat("rank ", peer,
                        " closed its communicator (it is not taking part in this operation)");
  }
  if (InterruptedItself(peer, marker.cause)) {
    return absl::StrCat("rank ", peer, " was interrupted during operation ", marker.call,
                        kInterruptedWhy);
  }
  return absl::StrCat("rank ", peer, " gave up on operation ", marker.call,
                      marker.cause >= 0 ? DescribeCause(marker.cause) : " (see its own error)");
}

Culprit CulpritOfCause(int cause) {
  if ((cause & MeshMarker::kInterruptedFlag) != 0) {
    return {cause & ~MeshMarker::kInterruptedFlag, Culprit::How::kInterrupted};
  }
  if ((cause & MeshMarker::kStalledFlag) != 0) {
    return {cause & ~MeshMarker::kStalledFlag, Culprit::How::kStalled};
  }
  if ((cause & MeshMarker::kClosedFlag) != 0) {
    return {cause & ~MeshMarker::kClosedFlag, Culprit::How::kLeft};
  }
  return {cause, Culprit::How::kVanished};
}

bool InterruptedItself(int peer, int cause) {
  return cause >= 0 && CulpritOfCause(cause) == Culprit{peer, Culprit::How::kInterrupted};
}

std::string DescribeCause(int cause) {
  const Culprit culprit = CulpritOfCause(cause);
  if (culprit.how == Culprit::How::kStalled || culprit.how == Culprit::How::kInterrupted) {
    return absl::StrCat(" after ", DescribeCulprit(culprit));
  }
  return absl::StrCat(" after rank ", culprit.rank,
                      SocketMesh::DescribeHow(culprit.how == Culprit::How::kLeft
                                                  ? SocketMesh::Departure::How::kConnectionClosed
                                                  : SocketMesh::Departure::How::kVanished,
                                              true));
}

}  // namespace shardkit::internal
