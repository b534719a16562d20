#include "integration/checkpoint/stream/stream_shard.h"

#include <algorithm>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <utility>

#include "absl/strings/str_cat.h"
#include "core/base/background_stage.h"
#include "core/base/check.h"
#include "core/base/slot_pipe.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "integration/checkpoint/stream/stream_buffer.h"
#include "integration/checkpoint/stream/tensor_bytes_reader.h"

namespace shardkit::checkpoint {
namespace {

constexpr size_t kSlots = 2;  // double buffering: one slot in use, the next one being filled

// The window ranges rank `rank` receives in `round`, adjacent blocks merged: its blocks (scatter)
// or the whole window (broadcast). Sender and receiver cut the transfer the same way.
std::vector<std::pair<int64_t, int64_t>> Segments(const Round& round, int rank, bool broadcast) {
  std::vector<std::pair<int64_t, int64_t>> segments;
  if (broadcast) {
    const auto total = static_cast<int64_t>(round.end - round.begin);
    if (total > 0) segments.emplace_back(0, total);
    return segments;
  }
  // The shared blocks are window bytes [0, shared_bytes); the rank's own ones one range after.
  if (round.shared_bytes > 0) segments.emplace_back(0, round.shared_bytes);
  const int64_t own = round.RankBytes(rank) - round.shared_bytes;
  if (own == 0) return segments;
  const int64_t at = round.blocks[round.own[static_cast<size_t>(rank)].first].window_offset;
  if (!segments.empty() && at == round.shared_bytes) {
    segments.back().second += own;
  } else {
    segments.emplace_back(at, own);
  }
  return segments;
}

// Fills the window with one tensor's blocks in `round`, reading the tensor's part of the round
// once: every block's pieces in increasing tensor order, through the reader's coalescing rule
// (TensorBytesReader::Want) — adjacent pieces of several blocks in staging-sized preads, a rank's
// scattered pieces (its columns, under direct) each alone or with small gaps.
absl::Status FillTensor(const StreamTensor& t, const Round& round,
                        std::span<const Block* const> blocks, TensorBytesReader& reader,
                        std::byte* window) {
  const auto from = static_cast<int64_t>(std::max(round.begin, t.begin) - t.begin);
  const auto to = static_cast<int64_t>(std::min(round.end, t.end) - t.begin);
  absl::Status status;
  if (t.replicated) {
    status = reader.Want(from, to - from, window + blocks[0]->window_offset);
  } else {
    std::vector<const ByteRuns*> runs;
    for (const Block* block : blocks) runs.push_back(&t.runs[static_cast<size_t>(block->shard)]);
    ForEachPieceInOrder(runs, from, to,
                        [&](size_t b, int64_t tensor_at, int64_t shard_at, int64_t bytes) {
                          const int64_t shift = blocks[b]->window_offset - blocks[b]->first;
                          if (status.ok()) {
                            status = reader.Want(tensor_at, bytes, window + (shift + shard_at));
                          }
                        });
  }
  if (!status.ok()) return status;  // a failed Want left nothing pending
  return reader.Flush();
}

// Under direct: where `block`'s bytes lie in one file of `source`, when they are one range of
// the tensor (a replicated tensor's part, a shard cut along its first dimension, or a part of one
// of a shard's runs) and the source can say (TensorSource::FileRangeOf). The rank then copies
// them into its file inside the kernel (CopyBlocks), as `cp` does, instead of reading them.
std::optional<TensorSource::FileRange> DirectRangeOf(const StreamSchedule& schedule,
                                                     const TensorSource& source,
                                                     const Block& block) {
  if (block.bytes <= 0) return std::nullopt;
  const StreamTensor& t = schedule.tensors()[block.tensor];
  int64_t tensor_at = block.first;  // a replicated tensor's block: its own bytes
  if (block.shard >= 0) {
    const ByteRuns& runs = t.runs[static_cast<size_t>(block.shard)];
    const bool contiguous = runs.count <= 1 || runs.Offset(runs.count - 1) - runs.Offset(0) ==
                                                   (runs.count - 1) * runs.length;
    const int64_t run = block.first / runs.length;
    if (contiguous) {
      tensor_at = runs.Offset(0) + block.first;
    } else if ((block.first + block.bytes - 1) / runs.length == run) {
      tensor_at = runs.Offset(run) + block.first % runs.length;
    } else {
      return std::nullopt;
    }
  }
  return source.FileRangeOf(t.source_index, tensor_at, block.bytes);
}

// The blocks a reading rank puts in its window: all of them at their window offsets (the source
// of scatter and broadcast), or (direct) only its own that it does not copy (DirectRangeOf), back
// to back as a receiver holds them.
std::vector<Block> BlocksToRead(const StreamSchedule& schedule, const TensorSource& source,
                                const Round& round, int rank, bool direct) {
  if (!direct) return round.blocks;
  std::vector<Block> mine;
  int64_t position = 0;
  round.ForEachBlockOf(rank, [&](const Block& block) {
    if (DirectRangeOf(schedule, source, block)) return;
    mine.push_back(block);
    mine.back().window_offset = position;
    position += block.bytes;
  });
  return mine;
}

// Fills `window` with `blocks` of `round`, tensor by tensor in file order. Each file read is
// first checked to be the one opened (not resized or replaced since: Reader::CheckUnchanged).
absl::Status FillWindow(const StreamSchedule& schedule, const Round& round,
                        std::span<const Block> window_blocks, const TensorSource& source,
                        TensorBytesReader& reader, std::byte* window) {
  std::vector<const Block*> blocks;  // grouped by tensor (the window is rank-major)
  for (const Block& block : window_blocks) blocks.push_back(&block);
  std::stable_sort(blocks.begin(), blocks.end(),
                   [](const Block* a, const Block* b) { return a->tensor < b->tensor; });
  const void* checked = nullptr;  // the files last checked
  for (size_t first = 0, last = 0; first < blocks.size(); first = last) {
    while (last < blocks.size() && blocks[last]->tensor == blocks[first]->tensor) ++last;
    const StreamTensor& t = schedule.tensors()[blocks[first]->tensor];
    if (source.header().tensors[t.source_index].name != t.name) {
      return absl::InternalError("schedule and checkpoint differ");
    }
    if (source.FilesOf(t.source_index) != checked) {
      checked = source.FilesOf(t.source_index);
      SHARDKIT_RETURN_IF_ERROR(source.CheckUnchanged(t.source_index));
    }
    reader.Reset(source, t.source_index);
    SHARDKIT_RETURN_IF_ERROR(
        FillTensor(t, round, std::span<const Block* const>(blocks).subspan(first, last - first),
                   reader, window));
  }
  return absl::OkStatus();
}

// Where this rank writes `block` in its file, or -1 when it does not (`--format dcp`: a replicated
// tensor off the source, a zero-size shard).
int64_t DestOf(const StreamOutput& output, const Block& block) {
  const int64_t place =
      output.dest[block.tensor][static_cast<size_t>(std::max<int64_t>(block.shard, 0))];
  return place < 0 ? -1 : output.data_start + place + block.first;
}

// Under direct: copies this rank's blocks of `round` that lie in one range of a source file
// (DirectRangeOf) into its file inside the kernel, each source file checked first (as FillWindow
// checks what it reads). `copied`: their bytes, read and written.
absl::Status CopyBlocks(const StreamSchedule& schedule, const TensorSource& source,
                        const Round& round, int rank, StreamOutput& output, int64_t& written,
                        int64_t& copied) {
  absl::Status status;
  const void* checked = nullptr;
  round.ForEachBlockOf(rank, [&](const Block& block) {
    if (!status.ok()) return;
    const std::optional<TensorSource::FileRange> range = DirectRangeOf(schedule, source, block);
    const int64_t dest = DestOf(output, block);
    if (!range || dest < 0) return;
    const size_t t = schedule.tensors()[block.tensor].source_index;
    if (source.FilesOf(t) != checked) {
      checked = source.FilesOf(t);
      status = source.CheckUnchanged(t);
      if (!status.ok()) return;
    }
    status = output.sink->CopyFrom(range->fd, *range->path, range->offset,
                                   static_cast<uint64_t>(dest), static_cast<size_t>(block.bytes));
    if (!status.ok()) return;
    output.sink->StartWriteback(static_cast<uint64_t>(dest), static_cast<uint64_t>(block.bytes));
    written += block.bytes;
    copied += block.bytes;
  });
  return status;
}

// Writes this rank's blocks of `round` from `data`: where the whole window is (broadcast, and the
// source's own window), at their window offsets; else back to back as received — but for the
// blocks `copied` says it copied instead (direct: CopyBlocks), which are not in `data`.
absl::Status WriteBlocks(const Round& round, int rank, bool broadcast, const std::byte* data,
                         StreamOutput& output, int64_t& written,
                         const std::function<bool(const Block&)>& copied = nullptr) {
  int64_t position = 0;
  absl::Status status;
  round.ForEachBlockOf(rank, [&](const Block& block) {
    if (!status.ok() || (copied && copied(block))) return;
    const int64_t at = broadcast ? block.window_offset : position;
    position += block.bytes;
    const int64_t dest = DestOf(output, block);
    if (dest < 0) return;
    status = output.sink->WriteAt(static_cast<uint64_t>(dest), data + at,
                                  static_cast<size_t>(block.bytes));
    if (!status.ok()) return;
    output.sink->StartWriteback(static_cast<uint64_t>(dest), static_cast<uint64_t>(block.bytes));
    written += block.bytes;
  });
  return status;
}

constexpr char kStreaming[] = "streaming shards";

std::string RoundContext(int64_t k, int64_t rounds) {
  return absl::StrCat(kStreaming, " (round ", k + 1, " of ", rounds, ")");
}

// A rank that cannot take part (its buffers could not be allocated) joins the first status round
// with its error, so that every rank stops there with the same message.
absl::Status ReportOnly(Communicator& comm, const absl::Status& local,
                        const StreamOptions& options) {
  return AgreeOnStatus(comm, local, kStreaming, options.call);
}

// The source sends every other rank its segments of the window (collective with the receivers).
absl::Status SendRound(const Round& round, const std::byte* window, Communicator& comm,
                       const StreamOptions& options) {
  std::vector<std::vector<ConstBuffer>> sends(static_cast<size_t>(comm.world_size()));
  for (int r = 0; r < comm.world_size(); ++r) {
    if (r == comm.rank()) continue;
    for (const auto& [at, bytes] : Segments(round, r, options.broadcast)) {
      sends[static_cast<size_t>(r)].emplace_back(window + at, static_cast<size_t>(bytes));
    }
  }
  return comm.ScatterSegments(sends, {}, comm.rank(), options.call);
}

// A reading rank's side (the source; under direct, every rank): a filler thread reads the
// windows ahead; this thread agrees, sends (not under direct) and writes the rank's own blocks. A
// read or write error is reported in the next status round.
absl::StatusOr<StreamStats> StreamFromReader(const StreamSchedule& schedule,
                                             const TensorSource& source, StreamOutput& output,
                                             Communicator& comm, const StreamOptions& options) {
  const int64_t rounds = schedule.rounds();
  const bool direct = options.direct;
  const int64_t window_bytes = direct ? schedule.MaxRankBytes(comm.rank())
                                      : std::min(schedule.window(), schedule.total_bytes());
  StreamStats stats;
  const size_t slots = std::min<size_t>(kSlots, static_cast<size_t>(rounds));
  absl::StatusOr<std::vector<std::shared_ptr<Storage>>> windows =
      AllocateBuffers(slots, window_bytes);
  absl::StatusOr<std::vector<std::shared_ptr<Storage>>> staging =
      AllocateBuffers(1, options.staging_bytes);
  if (!windows.ok() || !staging.ok()) {  // every rank learns it in the first status round
    return ReportOnly(comm, windows.ok() ? staging.status() : windows.status(), options);
  }
  stats.buffer_bytes = window_bytes * static_cast<int64_t>(slots) + options.staging_bytes;
  SlotPipe pipe(std::max<size_t>(slots, 1));
  TensorBytesReader reader(std::span<std::byte>((*staging)[0]->data(), (*staging)[0]->nbytes()));
  BackgroundStage filler(pipe, BackgroundStage::kProducer, rounds, [&](int64_t k, size_t slot) {
    const Round round = schedule.MakeRound(k);
    return FillWindow(schedule, round, BlocksToRead(schedule, source, round, comm.rank(), direct),
                      source, reader, (*windows)[slot]->data());
  });
  absl::Status local, status;
  int64_t copied = 0;  // direct: bytes copied inside the kernel (CopyBlocks), not read
  for (int64_t k = 0; k <= rounds; ++k) {  // one status round more: it covers the last writes
    std::optional<SlotPipe::Filled> filled;
    if (k < rounds) filled = pipe.WaitFilled();
    if (filled && local.ok()) local = filled->status;
    status = AgreeOnStatus(comm, local, kStreaming, options.call);
    if (!status.ok() || k == rounds) break;
    const Round round = schedule.MakeRound(k);
    const std::byte* window = (*windows)[filled->slot]->data();
    if (!direct) {
      status = Annotate(SendRound(round, window, comm, options), RoundContext(k, rounds));
      if (!status.ok()) break;
    }
    // The source's own blocks are in the window at their window offsets (as under broadcast);
    // under direct, a rank's window holds only its blocks that it does not copy, back to back.
    if (direct) {
      local = CopyBlocks(schedule, source, round, comm.rank(), output, stats.bytes_written, copied);
      if (local.ok()) {
        local = WriteBlocks(
            round, comm.rank(), /*broadcast=*/false, window, output, stats.bytes_written,
            [&](const Block& block) { return DirectRangeOf(schedule, source, block).has_value(); });
      }
    } else {
      local =
          WriteBlocks(round, comm.rank(), /*broadcast=*/true, window, output, stats.bytes_written);
    }
    pipe.Release(filled->slot);
    if (options.on_round) options.on_round(static_cast<int64_t>(round.end));
  }
  pipe.Close();
  filler.Join();
  stats.bytes_read = reader.bytes_read() + copied;
  if (!status.ok()) return status;
  return stats;
}

// A receiver's side: this thread agrees and receives into one buffer while a writer thread
// writes the other one's blocks. A write error is reported in the next status round.
absl::StatusOr<StreamStats> StreamToReceiver(const StreamSchedule& schedule, StreamOutput& output,
                                             Communicator& comm, const StreamOptions& options) {
  const int rank = comm.rank();
  const int64_t rounds = schedule.rounds();
  const int64_t buffer_bytes = options.broadcast
                                   ? std::min(schedule.window(), schedule.total_bytes())
                                   : schedule.MaxRankBytes(rank);
  StreamStats stats;
  const size_t slots = std::min<size_t>(kSlots, static_cast<size_t>(rounds));
  absl::StatusOr<std::vector<std::shared_ptr<Storage>>> allocated =
      AllocateBuffers(slots, buffer_bytes);
  if (!allocated.ok()) return ReportOnly(comm, allocated.status(), options);
  const std::vector<std::shared_ptr<Storage>>& buffers = *allocated;
  stats.buffer_bytes = buffer_bytes * static_cast<int64_t>(slots);
  SlotPipe pipe(std::max<size_t>(slots, 1));
  // Its first error closes the pipe, which wakes this thread to report it.
  BackgroundStage writer(pipe, BackgroundStage::kConsumer, rounds, [&](int64_t k, size_t slot) {
    return WriteBlocks(schedule.MakeRound(k), rank, options.broadcast, buffers[slot]->data(),
                       output, stats.bytes_written);
  });
  absl::Status status;
  for (int64_t k = 0; k <= rounds; ++k) {  // one status round more: it covers the last writes
    std::optional<size_t> slot;
    if (k < rounds) slot = pipe.AcquireFree();
    if (k == rounds) writer.Join();
    absl::Status local = writer.status();
    if (k < rounds && !slot && local.ok()) local = absl::InternalError("the writer stopped");
    status = AgreeOnStatus(comm, local, kStreaming, options.call);
    if (!status.ok() || k == rounds) break;
    const Round round = schedule.MakeRound(k);
    std::vector<MutableBuffer> recvs;
    int64_t position = 0;
    for (const auto& [at, bytes] : Segments(round, rank, options.broadcast)) {
      recvs.emplace_back(buffers[*slot]->data() + position, static_cast<size_t>(bytes));
      position += bytes;
    }
    status = Annotate(comm.ScatterSegments({}, recvs, options.src_rank, options.call),
                      RoundContext(k, rounds));
    if (!status.ok()) break;
    pipe.Publish(*slot, absl::OkStatus());
  }
  pipe.Close();
  writer.Join();
  if (!status.ok()) return status;
  return stats;
}

}  // namespace

absl::StatusOr<StreamStats> StreamShards(const StreamSchedule& schedule, const TensorSource* source,
                                         StreamOutput& output, Communicator& comm,
                                         const StreamOptions& options) {
  SHARDKIT_CHECK(options.staging_bytes > 0) << "StreamShards needs a staging buffer";
  if (options.direct || comm.rank() == options.src_rank) {
    SHARDKIT_CHECK(source != nullptr) << "a reading rank needs the checkpoint";
    return StreamFromReader(schedule, *source, output, comm, options);
  }
  return StreamToReceiver(schedule, output, comm, options);
}

}  // namespace shardkit::checkpoint
