// MeshPayload: AllToAllSegments' payload on the Gloo backend, moved over a mesh of its own (a
// second SocketMesh: the payload mesh) instead of Gloo's pairs. Gloo sends one contiguous buffer
// per message, after a ready-to-receive handshake; weight sync's strided pieces (a column block of
// a row chunk) would have to be packed first, a third copy per byte on hosts whose cores are busy
// with the kernel's two. The mesh writes each peer's segments as one message with sendmsg,
// gathering a strided piece's runs in the kernel's own copy (docs/performance.md, "Weight sync",
// has the numbers).
//
// A message per peer: a 16-byte header (the call's sequence number and the bytes that follow,
// checked on arrival) and then the segments in order; receives are scattered into their buffers.
#ifndef SHARDKIT_BACKENDS_GLOO_MESH_PAYLOAD_H_
#define SHARDKIT_BACKENDS_GLOO_MESH_PAYLOAD_H_

#include <sys/uio.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "backends/socket_mesh/socket_mesh.h"

namespace shardkit::gloo_backend {

class MeshPayload {
 public:
  MeshPayload(int world_size, uint64_t seq);

  // The payload of a backend's exchange: `sends` and `recvs` are Communicator::SendOp and RecvOp
  // (peer, data, size; a send gathered from `runs` where it has them).
  template <typename SendOps, typename RecvOps>
  static MeshPayload Of(int world_size, uint64_t seq, const SendOps& sends, const RecvOps& recvs) {
    MeshPayload payload(world_size, seq);
    for (const auto& s : sends) {
      if (s.runs.empty()) payload.Send(s.peer, s.data, s.size);
      for (const auto& run : s.runs) {
        if (run.size > 0) payload.Send(s.peer, run.data, run.size);
      }
    }
    for (const auto& r : recvs) payload.Recv(r.peer, r.data, r.size);
    return payload;
  }

  // Adds `size` bytes (not zero) at `data` to the message to / from `peer` (another rank).
  void Send(int peer, const void* data, size_t size);
  void Recv(int peer, void* data, size_t size);

  // Writes and reads every message through `mesh` by `deadline` (SocketMesh::Exchange), then
  // checks each arrived header. Errors: Exchange's; kInternal naming a peer whose header does not
  // say this call and these bytes.
  absl::Status Move(SocketMesh& mesh, absl::Time deadline);

  // After Move failed with `status` on `payload` (rank `rank` of `world_size`): the cause to
  // blame, SocketMesh's encoding, or -1. A payload connection can end mid-message, where a rank
  // that gave up cannot leave its marker, so the control mesh's markers (waited for up to `grace`
  // after a lost connection) come first, then what the payload mesh saw.
  static int CauseOfFailure(SocketMesh& control, const SocketMesh& payload,
                            const absl::Status& status, int rank, int world_size,
                            absl::Duration grace);

 private:
  struct Header {
    uint64_t seq = 0;
    uint64_t bytes = 0;
  };
  static_assert(sizeof(Header) == SocketMesh::kMinMessage);

  const uint64_t seq_;
  std::vector<Header> out_headers_, in_headers_;  // [peer]
  std::vector<uint64_t> expected_;                // [peer]: the bytes after the header
  std::vector<std::vector<iovec>> out_, in_;      // [peer]: the header, then the segments
};

}  // namespace shardkit::gloo_backend

#endif  // SHARDKIT_BACKENDS_GLOO_MESH_PAYLOAD_H_
