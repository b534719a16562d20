// The bodies of the collectives: what each op declares for the agreement (roots, sizes, local
// argument errors) and which sends and receives its payload phase posts. The call life cycle
// they run inside is in communicator.cc; the segment calls are in segments.cc.
#include <algorithm>
#include <cstring>

#include "core/base/status_macros.h"
#include "core/comm/communicator.h"
#include "core/comm/internal/call.h"
#include "core/comm/internal/call_agreement.h"
#include "core/comm/internal/segment_helpers.h"
#include "core/tensor/allocator.h"

namespace shardkit {
namespace internal {

void Note(LocalProblem& problem, LocalProblem candidate) {
  if (problem.error == LocalError::kNone) problem = candidate;
}

LocalProblem CheckRoot(int root, int world_size) {
  if (root >= 0 && root < world_size) return {};
  return {.error = LocalError::kRootOutOfRange, .value = root, .limit = world_size};
}

LocalProblem CheckCount(size_t count, int world_size) {
  if (count == static_cast<size_t>(world_size)) return {};
  return {
      .error = LocalError::kBufferCount, .value = static_cast<int64_t>(count), .limit = world_size};
}

LocalProblem CheckSelfSize(size_t sent, size_t received) {
  if (sent == received) return {};
  return {.error = LocalError::kSelfSize,
          .value = static_cast<int64_t>(sent),
          .limit = static_cast<int64_t>(received)};
}

absl::Status CopyToSelf(ConstBuffer from, void* to, const Device& to_device, size_t size) {
  if (size == 0 || (from.data == to && from.device == to_device)) return absl::OkStatus();
  return CopyBytes(to, to_device, from.data, from.device, size);
}

absl::Status CopySegmentsToSelf(std::span<const ConstBuffer> from,
                                std::span<const MutableBuffer> to) {
  size_t i = 0, j = 0, from_at = 0, to_at = 0;
  while (i < from.size() && j < to.size()) {
    const size_t n = std::min(from[i].size - from_at, to[j].size - to_at);
    ConstBuffer piece(static_cast<const std::byte*>(from[i].data) + from_at, n, from[i].device);
    SHARDKIT_RETURN_IF_ERROR(
        CopyToSelf(piece, static_cast<std::byte*>(to[j].data) + to_at, to[j].device, n));
    from_at += n;
    to_at += n;
    if (from_at == from[i].size) ++i, from_at = 0;
    if (to_at == to[j].size) ++j, to_at = 0;
  }
  return absl::OkStatus();
}

std::vector<uint64_t> SegmentSizes(std::span<const ConstBuffer> segments) {
  std::vector<uint64_t> sizes;
  for (const ConstBuffer& segment : segments) sizes.push_back(segment.size);
  return sizes;
}

uint64_t TotalSize(std::span<const uint64_t> sizes) {
  uint64_t total = 0;
  for (uint64_t size : sizes) total += size;
  return total;
}

}  // namespace internal

namespace {

using internal::CheckCount;
using internal::CheckRoot;
using internal::CheckSelfSize;
using internal::CopySegmentsToSelf;
using internal::CopyToSelf;
using internal::LocalError;
using internal::LocalProblem;
using internal::Note;
using internal::Phase;
using internal::SegmentSizes;
using internal::TotalSize;

}  // namespace

LocalProblem Communicator::CheckBuffer(const ConstBuffer& buffer, int index) const {
  if (!buffer.runs.empty()) return {.error = LocalError::kGather, .index = index, .value = -1};
  if (buffer.size > 0 && buffer.data == nullptr) {
    return {.error = LocalError::kNullBuffer,
            .index = index,
            .value = static_cast<int64_t>(buffer.size)};
  }
  if (!buffer.device.is_cpu() && !SupportsDevice(buffer.device)) {
    return {.error = LocalError::kDevice,
            .index = index,
            .value = internal::EncodeDevice(buffer.device)};
  }
  return {};
}

LocalProblem Communicator::CheckBuffers(std::span<const ConstBuffer> buffers) const {
  LocalProblem problem = CheckCount(buffers.size(), world_size());
  for (size_t i = 0; i < buffers.size(); ++i) Note(problem, CheckBuffer(buffers[i], i));
  return problem;
}

absl::Status Communicator::Broadcast(MutableBuffer buffer, int root, const CallOptions& options) {
  Call call = Begin(CollectiveOp::kBroadcast, options);
  internal::Declaration& d = call.decl;
  d.root = root;
  d.check_root = true;
  d.param = buffer.size;
  d.check_param = true;
  Note(d.problem, CheckRoot(root, world_size()));
  Note(d.problem, CheckBuffer(buffer, -1));
  return Run(call, [&]() -> absl::Status {
    if (buffer.size == 0) return absl::OkStatus();
    std::vector<SendOp> sends;
    std::vector<RecvOp> recvs;
    if (rank() == root) {
      for (int peer = 0; peer < world_size(); ++peer) {
        if (peer != root) sends.push_back({peer, buffer.data, buffer.size, buffer.device});
      }
    } else {
      recvs.push_back({root, buffer.data, buffer.size, buffer.device});
    }
    return Move(call, Phase::kPayload, sends, recvs);
  });
}

absl::Status Communicator::Scatter(std::span<const ConstBuffer> sends, MutableBuffer recv, int root,
                                   const CallOptions& options) {
  std::vector<std::vector<ConstBuffer>> segments;
  for (const ConstBuffer& send : sends) segments.push_back({send});
  return ScatterSegments(segments, std::span<const MutableBuffer>(&recv, 1), root, options);
}

absl::Status Communicator::ScatterSegments(std::span<const std::vector<ConstBuffer>> sends,
                                           std::span<const MutableBuffer> recvs, int root,
                                           const CallOptions& options) {
  Call call = Begin(CollectiveOp::kScatter, options);
  internal::Declaration& d = call.decl;
  const bool is_root = rank() == root;
  d.root = root;
  d.check_root = true;
  d.pairwise = true;
  Note(d.problem, CheckRoot(root, world_size()));
  const std::vector<ConstBuffer> recv_views(recvs.begin(), recvs.end());
  for (size_t k = 0; k < recv_views.size(); ++k) Note(d.problem, CheckBuffer(recv_views[k], k));
  if (is_root) {
    Note(d.problem, CheckCount(sends.size(), world_size()));
    for (size_t r = 0; r < sends.size(); ++r) {
      for (const ConstBuffer& segment : sends[r]) Note(d.problem, CheckBuffer(segment, r));
    }
  }
  const std::vector<uint64_t> recv_sizes = SegmentSizes(recv_views);
  const bool usable = d.problem.error == LocalError::kNone;
  if (usable && is_root) {
    const std::vector<uint64_t> self_sizes = SegmentSizes(sends[root]);
    Note(d.problem, CheckSelfSize(TotalSize(self_sizes), TotalSize(recv_sizes)));
    for (int peer = 0; peer < world_size(); ++peer) {
      if (peer == root) continue;
      const std::vector<uint64_t> sizes = SegmentSizes(sends[peer]);
      d.send_bytes[peer] = TotalSize(sizes);
      d.send_segment_digest[peer] = internal::SegmentDigest(sizes);
    }
  } else if (usable) {
    d.recv_bytes[root] = TotalSize(recv_sizes);
    d.recv_segment_digest[root] = internal::SegmentDigest(recv_sizes);
  }
  return Run(call, [&]() -> absl::Status {
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    if (is_root) {
      // The root's own segments: copied in order into its receive segments (same total size).
      SHARDKIT_RETURN_IF_ERROR(CopySegmentsToSelf(sends[root], recvs));
      for (int peer = 0; peer < world_size(); ++peer) {
        if (peer == root) continue;
        for (const ConstBuffer& segment : sends[peer]) {
          if (segment.size > 0) out.push_back({peer, segment.data, segment.size, segment.device});
        }
      }
    } else {
      for (const MutableBuffer& segment : recvs) {
        if (segment.size > 0) in.push_back({root, segment.data, segment.size, segment.device});
      }
    }
    return Move(call, Phase::kPayload, out, in);
  });
}

absl::Status Communicator::Gather(ConstBuffer send, std::span<const MutableBuffer> recvs, int root,
                                  const CallOptions& options) {
  Call call = Begin(CollectiveOp::kGather, options);
  internal::Declaration& d = call.decl;
  const bool is_root = rank() == root;
  d.root = root;
  d.check_root = true;
  d.pairwise = true;
  Note(d.problem, CheckRoot(root, world_size()));
  Note(d.problem, CheckBuffer(send, -1));
  std::vector<ConstBuffer> recv_views(recvs.begin(), recvs.end());
  if (is_root) Note(d.problem, CheckBuffers(recv_views));
  const bool usable = d.problem.error == LocalError::kNone;
  if (usable && is_root) {
    Note(d.problem, CheckSelfSize(send.size, recvs[root].size));
    for (int peer = 0; peer < world_size(); ++peer) d.recv_bytes[peer] = recvs[peer].size;
    d.recv_bytes[root] = 0;
  } else if (usable) {
    d.send_bytes[root] = send.size;
  }
  return Run(call, [&]() -> absl::Status {
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    if (is_root) {
      SHARDKIT_RETURN_IF_ERROR(CopyToSelf(send, recvs[root].data, recvs[root].device, send.size));
      for (int peer = 0; peer < world_size(); ++peer) {
        if (peer != root && recvs[peer].size > 0) {
          in.push_back({peer, recvs[peer].data, recvs[peer].size, recvs[peer].device});
        }
      }
    } else if (send.size > 0) {
      out.push_back({root, send.data, send.size, send.device});
    }
    return Move(call, Phase::kPayload, out, in);
  });
}

absl::StatusOr<std::vector<std::string>> Communicator::AllGather(ConstBuffer send,
                                                                 const CallOptions& options) {
  Call call = Begin(CollectiveOp::kAllGather, options);
  call.decl.param = send.size;
  Note(call.decl.problem, CheckBuffer(send, -1));
  // Small host inputs (the engine's digests) travel inside the header: one round instead of two.
  // A peer's input came inline exactly when its header says so (inline_size == its size).
  const bool send_inline = send.size <= internal::kInlineBytes && send.device.is_cpu() &&
                           call.decl.problem.error == LocalError::kNone;
  if (send_inline) call.decl.inline_data = send;
  std::vector<std::string> result(world_size());
  absl::Status status = Run(call, [&]() -> absl::Status {
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    int64_t inline_sent = 0, inline_received = 0;
    for (int peer = 0; peer < world_size(); ++peer) result[peer].resize(call.header(peer).param);
    SHARDKIT_RETURN_IF_ERROR(CopyToSelf(send, result[rank()].data(), Device::Cpu(), send.size));
    for (int peer = 0; peer < world_size(); ++peer) {
      if (peer == rank()) continue;
      const internal::ControlHeader& header = call.header(peer);
      if (send_inline) {
        inline_sent += static_cast<int64_t>(send.size);
      } else {
        out.push_back({peer, send.data, send.size, send.device});
      }
      if (header.inline_size == header.param) {
        std::memcpy(result[peer].data(), header.inline_data, result[peer].size());
        inline_received += static_cast<int64_t>(result[peer].size());
      } else {
        in.push_back({peer, result[peer].data(), result[peer].size()});
      }
    }
    Count(call, /*payload=*/true, inline_sent, inline_received);
    return Move(call, Phase::kPayload, out, in);
  });
  if (!status.ok()) return status;
  return result;
}

absl::Status Communicator::AllToAll(std::span<const ConstBuffer> sends,
                                    std::span<const MutableBuffer> recvs,
                                    const CallOptions& options) {
  Call call = Begin(CollectiveOp::kAllToAll, options);
  internal::Declaration& d = call.decl;
  d.pairwise = true;
  const int self = rank();
  std::vector<ConstBuffer> recv_views(recvs.begin(), recvs.end());
  Note(d.problem, CheckBuffers(sends));
  Note(d.problem, CheckBuffers(recv_views));
  if (d.problem.error == LocalError::kNone) {
    Note(d.problem, CheckSelfSize(sends[self].size, recvs[self].size));
    for (int peer = 0; peer < world_size(); ++peer) {
      d.send_bytes[peer] = peer == self ? 0 : sends[peer].size;
      d.recv_bytes[peer] = peer == self ? 0 : recvs[peer].size;
    }
  }
  return Run(call, [&]() -> absl::Status {
    SHARDKIT_RETURN_IF_ERROR(
        CopyToSelf(sends[self], recvs[self].data, recvs[self].device, recvs[self].size));
    std::vector<SendOp> out;
    std::vector<RecvOp> in;
    for (int peer = 0; peer < world_size(); ++peer) {
      if (peer == self) continue;
      const ConstBuffer& s = sends[peer];
      const MutableBuffer& r = recvs[peer];
      if (s.size > 0) out.push_back({peer, s.data, s.size, s.device});
      if (r.size > 0) in.push_back({peer, r.data, r.size, r.device});
    }
    return Move(call, Phase::kPayload, out, in);
  });
}

absl::Status Communicator::Barrier(const CallOptions& options) {
  // Round 1 of the agreement is itself a barrier: a rank's header leaves only once the rank has
  // entered the call, and the all-gather ends only when every rank's header has arrived.
  Call call = Begin(CollectiveOp::kBarrier, options);
  return Run(call, [] { return absl::OkStatus(); });
}

absl::StatusOr<std::unique_ptr<Communicator>> Communicator::Split(std::span<const int> ranks,
                                                                  const CallOptions& options) {
  Call call = Begin(CollectiveOp::kSplit, options);
  internal::Declaration& d = call.decl;
  d.param = internal::DigestRanks(ranks);
  d.check_param = true;
  std::vector<bool> seen(world_size());
  int new_rank = -1;
  if (ranks.empty()) d.problem = {.error = LocalError::kSplitEmpty};
  for (size_t i = 0; i < ranks.size() && d.problem.error == LocalError::kNone; ++i) {
    const int r = ranks[i];
    if (r < 0 || r >= world_size()) {
      d.problem = {.error = LocalError::kSplitRankOutOfRange, .value = r};
    } else if (seen[r]) {
      d.problem = {.error = LocalError::kSplitRankRepeated, .value = r};
    } else {
      seen[r] = true;
      if (r == rank()) new_rank = static_cast<int>(i);
    }
  }
  std::unique_ptr<Communicator> child;
  absl::Status status = Run(call, [&]() -> absl::Status {
    std::vector<int> members(ranks.begin(), ranks.end());
    SHARDKIT_ASSIGN_OR_RETURN(child,
                              CreateSubgroup(members, new_rank, call.decl.seq, call.deadline));
    return absl::OkStatus();
  });
  if (!status.ok()) return status;
  return child;
}

}  // namespace shardkit
