#include "core/engine/internal/sync_walk.h"

#include <algorithm>
#include <tuple>
#include <utility>

#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/shard_copy.h"
#include "core/engine/internal/sync_merge.h"

namespace shardkit::internal {
namespace {

constexpr int64_t kCoalesceBelow = int64_t{64} << 10;  // SyncPiece::coalesced

int64_t Bytes(const specs::Box& box, DType dtype) {
  int64_t n = static_cast<int64_t>(ElementSize(dtype));
  for (int64_t s : box.sizes) n *= s;
  return n;
}

bool Strided(const specs::Box& shard, const specs::Box& box) {
  specs::ShardMetadata rel{box.offsets, box.sizes};
  for (size_t d = 0; d < box.offsets.size(); ++d) rel.offsets[d] -= shard.offsets[d];
  return !RegionIsContiguous(shard.sizes, rel);
}

auto Key(const SyncPiece& p) {
  return std::tie(p.round, p.parameter, p.destination_shard, p.source_shard, p.part);
}

}  // namespace

SyncWalker::SyncWalker(const SyncGroups& groups, int me, int world, int64_t bucket)
    : groups_(groups),
      source_index_(world, -1),
      destination_index_(world, -1),
      me_(me),
      bucket_(bucket),
      send_used_(world),
      recv_used_(world),
      send_need_(world),
      recv_need_(world) {
  for (size_t i = 0; i < groups.source.size(); ++i) source_index_[groups.source[i]] = i;
  for (size_t i = 0; i < groups.destination.size(); ++i) {
    destination_index_[groups.destination[i]] = i;
  }
}

size_t SyncWalker::Holder(const SyncBoxes& source, size_t destination_shard, int to) const {
  const int own = source_index_[to];
  return own >= 0 ? static_cast<size_t>(own) : destination_shard % source.boxes.size();
}

SyncPiece SyncWalker::Make(size_t index, size_t source_shard, size_t destination_shard,
                           specs::Box box, const SyncBoxes& source, const SyncBoxes& destination,
                           DType dtype) const {
  SyncPiece p{.parameter = index,
              .from = groups_.source[source.group_ranks[source_shard]],
              .to = groups_.destination[destination.group_ranks[destination_shard]],
              .box = std::move(box),
              .source_shard = source_shard,
              .destination_shard = destination_shard};
  p.bytes = Bytes(p.box, dtype);
  if (p.from != p.to) {
    p.coalesced = p.bytes < kCoalesceBelow;
    p.staged_send = p.coalesced || Strided(source.boxes[source_shard], p.box);
    p.send_runs = RunCount(source.boxes[source_shard], p.box);
    p.staged_recv = p.coalesced || Strided(destination.boxes[destination_shard], p.box);
  }
  return p;
}

void SyncWalker::NewRound() {
  ++round_;
  for (int r : touched_) send_used_[r] = recv_used_[r] = 0;
  touched_.clear();
}

void SyncWalker::Keep(SyncPiece piece) {
  if (piece.bytes == 0) return;
  if (piece.to == me_) {
    ++receives_per_parameter.back();
    receives_.push_back(std::move(piece));
  } else if (piece.from == me_) {
    sends_.push_back(std::move(piece));
  }
}

bool SyncWalker::Fits(const SyncBoxes& source, const SyncBoxes& destination, DType dtype) {
  std::vector<int> ranks;
  auto need = [&](std::vector<int64_t>& v, int r, int64_t n) {
    if (send_need_[r] == 0 && recv_need_[r] == 0) ranks.push_back(r);
    v[r] += n;
  };
  for (size_t j = 0; j < destination.boxes.size(); ++j) {
    const int to = groups_.destination[destination.group_ranks[j]];
    const int64_t n = Bytes(destination.boxes[j], dtype);
    if (n == 0) continue;
    need(recv_need_, to, n);
    if (source.replicated) need(send_need_, groups_.source[Holder(source, j, to)], n);
  }
  if (!source.replicated) {
    for (size_t s = 0; s < source.boxes.size(); ++s) {
      const int64_t n = Bytes(source.boxes[s], dtype);
      if (n > 0) need(send_need_, groups_.source[source.group_ranks[s]], n);
    }
  }
  bool small = true, full = false;
  for (int r : ranks) {
    small = small && send_need_[r] <= bucket_ && recv_need_[r] <= bucket_;
    full =
        full || send_used_[r] + send_need_[r] > bucket_ || recv_used_[r] + recv_need_[r] > bucket_;
  }
  if (small) {
    if (full) NewRound();
    for (int r : ranks) {
      if (send_used_[r] == 0 && recv_used_[r] == 0) touched_.push_back(r);
      send_used_[r] += send_need_[r];
      recv_used_[r] += recv_need_[r];
    }
  }
  for (int r : ranks) send_need_[r] = recv_need_[r] = 0;
  return small;
}

void SyncWalker::EnumerateMine(size_t index, const SyncBoxes& source, const SyncBoxes& destination,
                               DType dtype) {
  auto keep = [&](SyncPiece p) {
    p.round = round_;
    Keep(std::move(p));
  };
  if (const int g = source_index_[me_]; g >= 0) {  // sends
    if (!source.replicated) {
      for (size_t s : source.by_rank[g]) {
        if (destination.replicated) {  // every destination rank takes the whole shard
          for (size_t j = 0; j < destination.boxes.size(); ++j) {
            SyncPiece p = Make(index, s, j, source.boxes[s], source, destination, dtype);
            if (p.to != me_) keep(std::move(p));
          }
          continue;
        }
        for (specs::BoxHit& hit : destination.index.Intersecting(source.boxes[s])) {
          SyncPiece p =
              Make(index, s, hit.shard, std::move(hit.intersection), source, destination, dtype);
          if (p.to != me_) keep(std::move(p));
        }
      }
    } else {
      for (size_t j = 0; j < destination.boxes.size(); ++j) {
        const int to = groups_.destination[destination.group_ranks[j]];
        if (to != me_ && Holder(source, j, to) == static_cast<size_t>(g)) {
          keep(Make(index, g, j, destination.boxes[j], source, destination, dtype));
        }
      }
    }
  }
  if (const int g = destination_index_[me_]; g >= 0) {  // receives
    for (size_t j : destination.by_rank[g]) {
      if (source.replicated) {
        keep(Make(index, Holder(source, j, me_), j, destination.boxes[j], source, destination,
                  dtype));
        continue;
      }
      for (specs::BoxHit& hit : source.index.Intersecting(destination.boxes[j])) {
        keep(Make(index, hit.shard, j, std::move(hit.intersection), source, destination, dtype));
      }
    }
  }
}

void SyncWalker::AssignOne(SyncPiece piece) {
  if (piece.from != piece.to) {
    const int64_t send = piece.staged_send ? piece.bytes : 0;
    const int64_t recv = piece.staged_recv ? piece.bytes : 0;
    if (send_used_[piece.from] + send > bucket_ || recv_used_[piece.to] + recv > bucket_) {
      NewRound();
    }
    for (int r : {piece.from, piece.to}) {
      if (send_used_[r] == 0 && recv_used_[r] == 0) touched_.push_back(r);
    }
    send_used_[piece.from] += send;
    recv_used_[piece.to] += recv;
  }
  piece.round = round_;
  Keep(std::move(piece));
}

// A staged piece larger than a bucket is cut along its first dimension longer than 1 (then the
// next), each part's staging recomputed.
void SyncWalker::Split(SyncPiece piece, const SyncBoxes& source, const SyncBoxes& destination,
                       DType dtype) {
  size_t d = 0;
  while (d < piece.box.sizes.size() && piece.box.sizes[d] <= 1) ++d;
  if (!(piece.staged_send || piece.staged_recv) || piece.bytes <= bucket_ ||
      d == piece.box.sizes.size()) {
    piece.part = next_part_++;  // the same sequence on every rank
    AssignOne(std::move(piece));
    return;
  }
  const int64_t per_index = piece.bytes / piece.box.sizes[d];
  const int64_t step = std::max<int64_t>(1, bucket_ / std::max<int64_t>(per_index, 1));
  for (int64_t at = 0; at < piece.box.sizes[d]; at += step) {
    specs::Box box = piece.box;
    box.offsets[d] += at;
    box.sizes[d] = std::min(step, piece.box.sizes[d] - at);
    SyncPiece part = Make(piece.parameter, piece.source_shard, piece.destination_shard,
                          std::move(box), source, destination, dtype);
    Split(std::move(part), source, destination, dtype);
  }
}

void SyncWalker::EnumerateAll(size_t index, const SyncBoxes& source, const SyncBoxes& destination,
                              DType dtype) {
  for (size_t j = 0; j < destination.boxes.size(); ++j) {
    const int to = groups_.destination[destination.group_ranks[j]];
    if (source.replicated) {
      Split(Make(index, Holder(source, j, to), j, destination.boxes[j], source, destination, dtype),
            source, destination, dtype);
      continue;
    }
    for (specs::BoxHit& hit : source.index.Intersecting(destination.boxes[j])) {
      Split(Make(index, hit.shard, j, std::move(hit.intersection), source, destination, dtype),
            source, destination, dtype);
    }
  }
}

void SyncWalker::Parameter(size_t index, const SyncBoxes& source, const SyncBoxes& destination,
                           DType dtype) {
  receives_per_parameter.push_back(0);
  next_part_ = 0;
  if (Fits(source, destination, dtype)) {
    EnumerateMine(index, source, destination, dtype);
  } else {
    EnumerateAll(index, source, destination, dtype);
  }
}

std::vector<SyncPiece> SyncWalker::TakeSends() {
  std::sort(sends_.begin(), sends_.end(),
            [](const SyncPiece& a, const SyncPiece& b) { return Key(a) < Key(b); });
  return std::move(sends_);
}

std::vector<SyncPiece> SyncWalker::TakeReceives() {
  std::sort(receives_.begin(), receives_.end(),
            [](const SyncPiece& a, const SyncPiece& b) { return Key(a) < Key(b); });
  return std::move(receives_);
}

absl::Status PlanMoves(const std::vector<MoveParameter>& parameters, const SyncGroups& groups,
                       int64_t bucket, Communicator& comm, const CallOptions& call,
                       absl::Time start, SyncPlan& plan) {
  SyncWalker walker(groups, comm.rank(), comm.world_size(), bucket);
  std::vector<std::string> names;
  for (const MoveParameter& p : parameters) {
    walker.Parameter(names.size(), *p.source, *p.destination, p.dtype);
    names.push_back(p.name);
  }
  std::vector<SyncPiece> sends = walker.TakeSends(), receives = walker.TakeReceives();
  SHARDKIT_ASSIGN_OR_RETURN(
      const int rounds,
      MergeRoundsAcrossRanks(sends, receives, walker.rounds(), bucket, comm, call));
  SyncPlanAccess::Finish(plan, std::move(names), rounds, std::move(sends), std::move(receives),
                         std::move(walker.receives_per_parameter), absl::Now() - start);
  return absl::OkStatus();
}

}  // namespace shardkit::internal
