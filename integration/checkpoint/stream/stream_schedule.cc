#include "integration/checkpoint/stream/stream_schedule.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"

namespace shardkit::checkpoint {

absl::StatusOr<StreamTensor> MakeStreamTensor(std::string name, DType dtype, Shape shape,
                                              uint64_t begin, uint64_t end, bool replicated,
                                              std::vector<specs::ShardMetadata> shards) {
  StreamTensor tensor;
  tensor.name = std::move(name);
  tensor.dtype = dtype;
  tensor.shape = std::move(shape);
  tensor.replicated = replicated;
  tensor.begin = begin;
  tensor.end = end;
  if (replicated) return tensor;
  tensor.shards = std::move(shards);
  for (size_t s = 0; s < tensor.shards.size(); ++s) {
    absl::StatusOr<ByteRuns> runs = RunsOf(tensor.shape, ElementBits(dtype), tensor.shards[s]);
    if (!runs.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "parameter ", QuoteName(tensor.name), " (", std::string(SafetensorsName(dtype)),
          ShapeToString(tensor.shape), "): shard ", s, " (", specs::ShardToString(tensor.shards[s]),
          "): ", runs.status().message()));
    }
    tensor.runs.push_back(*std::move(runs));
  }
  return tensor;
}

StreamSchedule::StreamSchedule(std::vector<StreamTensor> tensors, int world_size, int64_t window)
    : tensors_(std::move(tensors)), world_(world_size), window_(window) {
  std::stable_sort(tensors_.begin(), tensors_.end(),
                   [](const StreamTensor& a, const StreamTensor& b) { return a.begin < b.begin; });
  for (const StreamTensor& tensor : tensors_) {
    total_ = std::max(total_, static_cast<int64_t>(tensor.end));
  }
  rounds_ = (total_ + window_ - 1) / window_;
}

Round StreamSchedule::MakeRound(int64_t k) const {
  Round round;
  round.begin = static_cast<uint64_t>(k * window_);
  round.end = static_cast<uint64_t>(std::min(total_, (k + 1) * window_));
  std::vector<Block> shared;
  std::vector<std::vector<Block>> own(static_cast<size_t>(world_));
  auto first = std::partition_point(tensors_.begin(), tensors_.end(),
                                    [&](const StreamTensor& t) { return t.end <= round.begin; });
  for (auto it = first; it != tensors_.end() && it->begin < round.end; ++it) {
    const auto index = static_cast<size_t>(it - tensors_.begin());
    const auto from = static_cast<int64_t>(std::max(round.begin, it->begin) - it->begin);
    const auto to = static_cast<int64_t>(std::min(round.end, it->end) - it->begin);
    if (from >= to) continue;  // an empty tensor
    if (it->replicated) {
      shared.push_back({index, -1, 0, from, to - from});
      continue;
    }
    for (size_t s = 0; s < it->shards.size(); ++s) {
      const auto [begin, bytes] = ShardSpan(it->runs[s], from, to);
      if (bytes == 0) continue;
      own[static_cast<size_t>(it->shards[s].placement.rank())].push_back(
          {index, static_cast<int64_t>(s), 0, begin, bytes});
    }
  }
  int64_t offset = 0;
  auto place = [&](Block block) {
    block.window_offset = offset;
    offset += block.bytes;
    round.blocks.push_back(block);
  };
  for (const Block& block : shared) place(block);
  round.shared = round.blocks.size();
  round.shared_bytes = offset;
  round.own.reserve(own.size());
  for (const std::vector<Block>& blocks : own) {
    const size_t first = round.blocks.size();
    for (const Block& block : blocks) place(block);
    round.own.emplace_back(first, round.blocks.size());
  }
  return round;
}

int64_t Round::RankBytes(int rank) const {
  const auto [first, last] = own[static_cast<size_t>(rank)];
  if (first == last) return shared_bytes;
  return shared_bytes + blocks[last - 1].window_offset + blocks[last - 1].bytes -
         blocks[first].window_offset;
}

int64_t StreamSchedule::MaxRankBytes(int rank) const {
  int64_t most = 0;
  for (int64_t k = 0; k < rounds_; ++k) {
    most = std::max(most, MakeRound(k).RankBytes(rank));
  }
  return most;
}

}  // namespace shardkit::checkpoint
