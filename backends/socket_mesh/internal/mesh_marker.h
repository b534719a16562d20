// The parting marker of a control mesh connection (backends/socket_mesh/socket_mesh.h): the last
// kMeshMarkerSize bytes a rank sends a peer, saying why it leaves ("goodbye": its communicator was
// closed; "gave up": it failed), during which call, and for a gave-up marker the rank whose
// departure without a word made it give up, if it knows one. Its magic never begins an agreement
// message (headers begin with "SHK1", verdicts with "SHKV"), and mesh messages are at least as
// long as a marker.
//
// Wire: magic (4 bytes: ff ff 'M' 'K'), kind (1), cause + 1 (3, little-endian; 0: none known),
// call (8). Markers from before the cause was carried have zero there: they parse as no cause.
#ifndef SHARDKIT_BACKENDS_SOCKET_MESH_INTERNAL_MESH_MARKER_H_
#define SHARDKIT_BACKENDS_SOCKET_MESH_INTERNAL_MESH_MARKER_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "core/comm/culprit.h"

namespace shardkit::internal {

struct MeshMarker {
  static constexpr char kGoodbye = 'G';
  static constexpr char kGaveUp = 'A';
  // A cause with this bit set names a rank whose connection of another transport (a Gloo pair)
  // closed before its part arrived: it went away or gave up, which that connection cannot tell.
  static constexpr int kClosedFlag = 1 << 23;
  // A cause with this bit set names a rank that stopped making progress: ranks waiting on it
  // reached their deadline, and it had neither left nor given up (Gloo's stall search).
  static constexpr int kStalledFlag = 1 << 22;
  // A cause with this bit set names a rank that was interrupted: its program abandoned the call
  // (Communicator::Abort, e.g. on Ctrl-C). The interrupted rank's own markers carry it.
  static constexpr int kInterruptedFlag = 1 << 21;
  // Causes naming ranks above this do not fit the 3 bytes: they travel as none known.
  static constexpr int kMaxCause = kInterruptedFlag - 2;

  char kind = kGoodbye;
  uint64_t call = 0;  // the last call the sender started
  // The rank whose departure without a word (killed, crashed) made the sender give up, seen by
  // the sender itself or learned from a marker it received; -1 if none known.
  int cause = -1;
};

inline constexpr size_t kMeshMarkerSize = 16;

// The marker's 16 bytes.
std::string EncodeMarker(const MeshMarker& marker);

// The marker `bytes` hold (exactly kMeshMarkerSize of them), if they are one.
std::optional<MeshMarker> ParseMarker(const void* bytes, size_t size);

// "rank 2 closed its communicator (it is not taking part in this operation)", "rank 2 gave up
// on operation 7 (see its own error)" or, with a cause, "rank 2 gave up on operation 7 after rank
// 3 went away without closing its communicator (killed or crashed?)", or for a rank interrupted
// itself "rank 2 was interrupted during operation 7 (Ctrl-C, ...)", for an Exchange that met the
// marker instead of a message.
std::string DescribeMarker(int peer, const MeshMarker& marker);

// The rank a cause (>= 0) names, and how: its flags decoded.
Culprit CulpritOfCause(int cause);

// Whether `cause` (-1: none) says that `peer` itself was interrupted: the cause an interrupted
// rank's own markers carry.
bool InterruptedItself(int peer, int cause);

// " after rank 3 went away without closing its communicator (killed or crashed?)" (or, with
// kClosedFlag, " after rank 3 went away or gave up: ...", with kStalledFlag, " after rank 3
// stopped making progress ...", with kInterruptedFlag, " after rank 3 was interrupted ..."): why
// a rank gave up, when `cause` (>= 0) is known.
std::string DescribeCause(int cause);

}  // namespace shardkit::internal

#endif  // SHARDKIT_BACKENDS_SOCKET_MESH_INTERNAL_MESH_MARKER_H_
