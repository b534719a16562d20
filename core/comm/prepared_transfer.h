// PreparedTransfer: a transfer of segments between every pair of ranks, agreed once and then run
// round by round without an agreement of its own, for callers that move the same shapes again
// and again (weight sync's rounds, a benchmark's repeats).
//
//   std::vector<RoundShape> rounds = ...;  // per round: each peer's segment sizes, both ways
//   SHARDKIT_ASSIGN_OR_RETURN(PreparedTransfer t,
//                             PreparedTransfer::Prepare(comm, rounds, plan_digest, options));
//   for (size_t r = 0; r < rounds.size(); ++r) {
//     SHARDKIT_RETURN_IF_ERROR(t.Run(r, sends[r], recvs[r]));
//   }
//   SHARDKIT_RETURN_IF_ERROR(t.Close());
//
// The model is MPI-4's persistent collectives (`MPI_Alltoallv_init`, then `MPI_Start` and
// `MPI_Wait` per use, then `MPI_Request_free`) and NIXL's prepared transfer lists: what both sides
// of every pair will move is checked once, so that each later round is payload only.
//
// - Prepare is a collective call (kind kAllToAllSegments): its agreement checks, for every pair
//   and round, the byte counts and segment sizes, and that every rank passed the same `check` and
//   round count. A mismatch is the same kInvalidArgument on every rank, before any byte moves.
// - Run(round, …) moves one round: the caller's buffers must have exactly the prepared segment
//   sizes of that round. Rounds may run in any order and any number of times, but every rank runs
//   the same rounds in the same order, and may make other calls on the communicator in between.
//   A round goes through the communicator's lock, the transfer's deadline, poisoning and the
//   counters (bytes under kAllToAllSegments) like every call; it has no agreement, so a round
//   that fails on one rank (a transport error, a timeout) fails only the ranks that exchange with
//   it, and poisons their communicators.
// - Close() ends the transfer with one more agreement when more than one round ran (the first
//   round after Prepare is covered by Prepare's agreement, as any call's payload is by its own),
//   so that a rank that died or stalled during the rounds fails every rank, also those that
//   moved nothing with it.
//
// A transfer holds a reference to its communicator, which must outlive it; it is used by one
// thread (the communicator's).
#ifndef SHARDKIT_CORE_COMM_PREPARED_TRANSFER_H_
#define SHARDKIT_CORE_COMM_PREPARED_TRANSFER_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/comm/communicator.h"

namespace shardkit {

// The segments of one round: sends[peer] and recvs[peer] hold the sizes of what this rank sends
// to and receives from `peer`, in order (one entry per rank; zero sizes are skipped on both sides,
// as in AllToAllSegments; [self]: copied within the rank, same total both ways).
struct RoundShape {
  std::vector<std::vector<uint64_t>> sends, recvs;

  // The shape of a round's buffers.
  static RoundShape Of(std::span<const std::vector<ConstBuffer>> sends,
                       std::span<const std::vector<MutableBuffer>> recvs);
  bool operator==(const RoundShape&) const = default;
};

class PreparedTransfer {
 public:
  // Whether the rounds on `comm` take gathered sends (ConstBuffer::runs) to other ranks, from
  // host memory: its backend writes the runs itself (Gloo), so a strided range is not packed.
  static bool Gathers(const Communicator& comm);

  // Agrees on `rounds` (one shape each, at least one) and `check` (a digest of what the callers
  // agreed on earlier; the same on every rank) in one call. `options`' deadline is resolved here
  // and holds for every round and for Close.
  // Errors: as AllToAllSegments; kInvalidArgument also when ranks prepared different round counts
  // or a pair's sizes differ in any round (naming the pair).
  static absl::StatusOr<PreparedTransfer> Prepare(Communicator& comm,
                                                  std::vector<RoundShape> rounds, uint64_t check,
                                                  const CallOptions& options = {});

  PreparedTransfer(PreparedTransfer&&) = default;
  PreparedTransfer& operator=(PreparedTransfer&&) = delete;

  size_t rounds() const { return shapes_.size(); }
  const RoundShape& shape(size_t round) const { return shapes_[round]; }

  // Moves round `round`: sends[peer] / recvs[peer] with the prepared sizes; gathered sends where
  // Gathers(comm). With `arrived`, as AllToAllSegments.
  // Errors: kInvalidArgument when the buffers are not the round's shape or are unusable (null,
  // another device, gathered where the backend does not gather); the communicator is poisoned then
  // too, since the peers are already moving this round. Otherwise as AllToAllSegments' payload.
  [[nodiscard]] absl::Status Run(size_t round, std::span<const std::vector<ConstBuffer>> sends,
                                 std::span<const std::vector<MutableBuffer>> recvs,
                                 const Communicator::SegmentArrived* arrived = nullptr);

  // The closing agreement (only when more than one round ran). Errors: as Barrier.
  [[nodiscard]] absl::Status Close();

 private:
  friend class Communicator;
  PreparedTransfer(Communicator& comm, std::vector<RoundShape> shapes, uint64_t check, uint64_t seq,
                   absl::Time deadline)
      : comm_(comm), shapes_(std::move(shapes)), check_(check), seq_(seq), deadline_(deadline) {}

  // "round 2 of 5 of the transfer prepared at seq 17": how a round's errors name it.
  std::string RoundLabel(size_t round) const;
  // Whether a round's buffers have the round's shape; the error names the first difference.
  absl::Status CheckShape(size_t round, std::span<const std::vector<ConstBuffer>> sends,
                          std::span<const std::vector<MutableBuffer>> recvs) const;

  Communicator& comm_;
  std::vector<RoundShape> shapes_;
  uint64_t check_;
  uint64_t seq_;  // Prepare's sequence number
  absl::Time deadline_;
  int64_t runs_ = 0;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_PREPARED_TRANSFER_H_
