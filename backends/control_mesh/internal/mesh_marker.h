// The parting marker of a control mesh connection (backends/control_mesh/control_mesh.h): the last
// kMeshMarkerSize bytes a rank sends a peer, saying why it leaves ("goodbye": its communicator was
// closed; "gave up": it failed) and during which call. Its magic never begins an agreement message
// (headers begin with "SHK1", verdicts with "SHKV"), and mesh messages are at least as long as a
// marker.
#ifndef SHARDKIT_BACKENDS_CONTROL_MESH_INTERNAL_MESH_MARKER_H_
#define SHARDKIT_BACKENDS_CONTROL_MESH_INTERNAL_MESH_MARKER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace shardkit::internal {

struct MeshMarker {
  static constexpr char kGoodbye = 'G';
  static constexpr char kGaveUp = 'A';

  char kind = kGoodbye;
  uint64_t call = 0;  // the last call the sender started
};

inline constexpr size_t kMeshMarkerSize = 16;

// The marker's 16 bytes.
std::string EncodeMarker(const MeshMarker& marker);

// The marker `bytes` hold (exactly kMeshMarkerSize of them), if they are one.
std::optional<MeshMarker> ParseMarker(const void* bytes, size_t size);

// "rank 2 closed its communicator (it is not taking part in this operation)" or "rank 2 gave up
// on operation 7 (see its own error)", for an Exchange that met the marker instead of a message.
std::string DescribeMarker(int peer, const MeshMarker& marker);

}  // namespace shardkit::internal

#endif  // SHARDKIT_BACKENDS_CONTROL_MESH_INTERNAL_MESH_MARKER_H_
