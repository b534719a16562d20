#include "backends/gloo/mesh_payload.h"

#include <span>

#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"

namespace shardkit::gloo_backend {

MeshPayload::MeshPayload(int world_size, uint64_t seq)
    : seq_(seq),
      out_headers_(world_size),
      in_headers_(world_size),
      expected_(world_size),
      out_(world_size),
      in_(world_size) {}

void MeshPayload::Send(int peer, const void* data, size_t size) {
  if (out_[peer].empty()) out_[peer].push_back({&out_headers_[peer], sizeof(Header)});
  out_[peer].push_back({const_cast<void*>(data), size});
  out_headers_[peer].seq = seq_;
  out_headers_[peer].bytes += size;
}

void MeshPayload::Recv(int peer, void* data, size_t size) {
  if (in_[peer].empty()) in_[peer].push_back({&in_headers_[peer], sizeof(Header)});
  in_[peer].push_back({data, size});
  expected_[peer] += size;
}

absl::Status MeshPayload::Move(SocketMesh& mesh, absl::Time deadline) {
  std::vector<SocketMesh::Send> sends;
  std::vector<SocketMesh::Recv> recvs;
  for (size_t peer = 0; peer < out_.size(); ++peer) {
    const int p = static_cast<int>(peer);
    if (!out_[peer].empty()) {
      sends.push_back({p, &out_headers_[peer], sizeof(Header) + out_headers_[peer].bytes,
                       std::span<const iovec>(out_[peer])});
    }
    if (!in_[peer].empty()) {
      recvs.push_back({p, &in_headers_[peer], sizeof(Header) + expected_[peer],
                       std::span<const iovec>(in_[peer])});
    }
  }
  SHARDKIT_RETURN_IF_ERROR(mesh.Exchange(sends, recvs, deadline, seq_));
  for (size_t peer = 0; peer < in_.size(); ++peer) {
    const Header& h = in_headers_[peer];
    if (!in_[peer].empty() && (h.seq != seq_ || h.bytes != expected_[peer])) {
      return absl::InternalError(absl::StrCat("peer ", peer, ": its payload came as call ", h.seq,
                                              "'s ", h.bytes, " bytes, expected call ", seq_, "'s ",
                                              expected_[peer], " (a backend bug)"));
    }
  }
  return absl::OkStatus();
}

int MeshPayload::CauseOfFailure(SocketMesh& control, const SocketMesh& payload,
                                const absl::Status& status, int rank, int world_size,
                                absl::Duration grace) {
  if (control.cause() < 0 && absl::IsUnavailable(status)) {
    std::vector<int> everyone;
    for (int r = 0; r < world_size; ++r) {
      if (r != rank) everyone.push_back(r);
    }
    (void)control.Departures(everyone, grace);  // returns at the first departure
  }
  return control.cause() >= 0 ? control.cause() : payload.cause();
}

}  // namespace shardkit::gloo_backend
