#include "core/store/rendezvous.h"

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"

namespace shardkit {
namespace {

// "rendezvous of 4 ranks timed out: ranks 2, 3 never joined (...)": the ranks whose `key` is
// absent from the store now.
absl::Status NeverJoinedError(Store& store, int size, const std::function<std::string(int)>& key,
                              const std::string& prefix) {
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    absl::StatusOr<bool> present = store.Check({key(r)});
    if (present.ok() && !*present) missing.push_back(r);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous of ", size, " ranks timed out: rank", missing.size() == 1 ? " " : "s ",
      absl::StrJoin(missing, ", "), " never joined (store keys under \"", prefix, "\")"));
}

// A generation's outcome, as recorded under "<generation>/outcome": one of these words, then
// (for a failure) the message every member returns.
constexpr char kJoined[] = "joined";
constexpr char kConflict[] = "conflict ";
constexpr char kTimedOut[] = "timeout ";
// The rank that decided an outcome records it right after: this only covers a loaded machine.
constexpr absl::Duration kOutcomeGrace = absl::Seconds(10);

// The member's Status for a recorded outcome.
absl::Status OutcomeStatus(absl::string_view outcome) {
  if (outcome == kJoined) return absl::OkStatus();
  if (absl::ConsumePrefix(&outcome, kConflict)) return absl::InvalidArgumentError(outcome);
  if (absl::ConsumePrefix(&outcome, kTimedOut)) return absl::DeadlineExceededError(outcome);
  return absl::InternalError(
      absl::StrCat("rendezvous: malformed outcome \"", outcome, "\" in the store"));
}

// One rank's JoinFreshGeneration. Keys of generation G, under "<prefix>/gen<G>": claim/<rank>
// counts the processes that claimed a rank, claimed the ranks claimed once, launch/<id> marks a
// launch that took part, deciders the ranks that tried to decide the outcome, and outcome holds
// the first one's decision.
class GenerationJoin {
 public:
  GenerationJoin(Store& store, const std::string& prefix, int rank, int size,
                 const std::string& launch_id, absl::Time deadline)
      : store_(store),
        prefix_(prefix),
        rank_(rank),
        size_(size),
        launch_id_(launch_id),
        deadline_(deadline) {}

  absl::StatusOr<std::string> Run() {
    for (int64_t g = 0;; ++g) {
      if (g > 0 && absl::Now() > deadline_) {
        return absl::DeadlineExceededError(
            absl::StrCat("rendezvous of ", size_, " ranks timed out while reading the outcomes of ",
                         g, " earlier generations under \"", prefix_, "\""));
      }
      SHARDKIT_ASSIGN_OR_RETURN(bool decided, store_.Check({Key(g, "outcome")}));
      if (decided) {
        SHARDKIT_RETURN_IF_ERROR(FailureOfOurLaunch(g));
        continue;
      }
      SHARDKIT_ASSIGN_OR_RETURN(std::optional<std::string> joined, Join(g));
      if (joined.has_value()) return *joined;
    }
  }

 private:
  std::string Generation(int64_t g) const { return absl::StrCat(prefix_, "/gen", g); }
  std::string Key(int64_t g, absl::string_view name) const {
    return absl::StrCat(Generation(g), "/", name);
  }
  std::string ClaimKey(int64_t g, int rank) const { return Key(g, absl::StrCat("claim/", rank)); }
  std::string LaunchKey(int64_t g) const { return Key(g, absl::StrCat("launch/", launch_id_)); }
  std::string ClaimerKey(int64_t g, int rank) const {
    return Key(g, absl::StrCat("claimer/", rank));
  }

  // Generation g is decided: its failure if a rank was claimed twice in it and this process's
  // launch took part; a failure too if g joined with a process of this launch as a member but
  // without this one (its rank was another launch's: two launches overlap and together started
  // every rank). Ok otherwise: a generation of other jobs, or one that timed out (which a process
  // of this launch may have marked while it found itself too late for it, and went on).
  absl::Status FailureOfOurLaunch(int64_t g) {
    if (launch_id_.empty()) return absl::OkStatus();
    SHARDKIT_ASSIGN_OR_RETURN(bool ours, store_.Check({LaunchKey(g)}));
    if (!ours) return absl::OkStatus();
    SHARDKIT_ASSIGN_OR_RETURN(std::string outcome, store_.Get(Key(g, "outcome"), kOutcomeGrace));
    if (outcome == kJoined) return OverlapIfAnotherLaunchHasOurRank(g);
    if (!absl::StartsWith(outcome, kConflict)) return absl::OkStatus();
    return OutcomeStatus(outcome);
  }

  // g joined with a process of this launch among its members. Fine if this rank is this launch's
  // there too (a later job of the same launch: `sh -c 'shardkit …; shardkit …'`); else another
  // launch's process has this rank — two launches overlap — and this one fails now rather than
  // wait alone in the next generation.
  absl::Status OverlapIfAnotherLaunchHasOurRank(int64_t g) {
    const std::string claimer = ClaimerKey(g, rank_);
    SHARDKIT_ASSIGN_OR_RETURN(const bool recorded, store_.Check({claimer}));
    if (!recorded) return absl::OkStatus();  // a generation of an older shardkit
    SHARDKIT_ASSIGN_OR_RETURN(const std::string launch, store_.Get(claimer, kOutcomeGrace));
    if (launch == launch_id_) return absl::OkStatus();
    return absl::InvalidArgumentError(Conflict(g).substr(sizeof(kConflict) - 1));
  }

  // Claims this rank in generation g: its prefix once every rank joined, nullopt if g turned out
  // to be over before this claim (try the next), or g's failure.
  absl::StatusOr<std::optional<std::string>> Join(int64_t g) {
    if (!launch_id_.empty()) SHARDKIT_RETURN_IF_ERROR(store_.Add(LaunchKey(g), 1).status());
    SHARDKIT_ASSIGN_OR_RETURN(int64_t claims, store_.Add(ClaimKey(g, rank_), 1));
    std::string outcome;
    if (claims > 1) {
      SHARDKIT_ASSIGN_OR_RETURN(outcome, Decide(g, Conflict(g)));
      // Decided before this claim, by a job that joined or timed out: this process is a later
      // job's (its claim leaves g's members alone: they only wait for the outcome) — unless
      // another process of its own launch claimed in g: then two launches overlap and together
      // started every rank, and this duplicate fails now rather than wait alone in g + 1.
      if (!absl::StartsWith(outcome, kConflict)) {
        SHARDKIT_ASSIGN_OR_RETURN(const bool split, LaunchSplit(g));
        if (!split) return std::nullopt;
        SHARDKIT_RETURN_IF_ERROR(OverlapIfAnotherLaunchHasOurRank(g));
        return std::nullopt;
      }
    } else {
      // Who has this rank in g, before g can be decided: a later process of the same launch that
      // finds g joined reads it (OverlapIfAnotherLaunchHasOurRank).
      if (!launch_id_.empty()) {
        SHARDKIT_RETURN_IF_ERROR(store_.Set(ClaimerKey(g, rank_), launch_id_));
      }
      SHARDKIT_ASSIGN_OR_RETURN(int64_t claimed, store_.Add(Key(g, "claimed"), 1));
      SHARDKIT_ASSIGN_OR_RETURN(
          outcome, claimed == size_ ? Decide(g, std::string(kJoined)) : AwaitOutcome(g));
    }
    SHARDKIT_RETURN_IF_ERROR(OutcomeStatus(outcome));
    return Generation(g);
  }

  // Whether a process of this one's launch other than itself claimed in g (the launch's counter
  // in g counts them, this one included).
  absl::StatusOr<bool> LaunchSplit(int64_t g) {
    if (launch_id_.empty()) return false;
    SHARDKIT_ASSIGN_OR_RETURN(const int64_t processes, store_.Add(LaunchKey(g), 0));
    return processes > 1;
  }

  // Waits for g's outcome until the deadline, then proposes that it timed out.
  absl::StatusOr<std::string> AwaitOutcome(int64_t g) {
    absl::Status waited = store_.Wait({Key(g, "outcome")}, deadline_ - absl::Now());
    if (waited.ok()) return store_.Get(Key(g, "outcome"), kOutcomeGrace);
    if (waited.code() != absl::StatusCode::kDeadlineExceeded) return waited;
    absl::Status never_joined = NeverJoinedError(
        store_, size_, [&](int r) { return ClaimKey(g, r); }, Generation(g));
    return Decide(g, absl::StrCat(kTimedOut, never_joined.message()));
  }

  // Records `proposal` as g's outcome unless another rank decided first: the outcome recorded.
  // One counter decides, so members never see two outcomes.
  absl::StatusOr<std::string> Decide(int64_t g, std::string proposal) {
    SHARDKIT_ASSIGN_OR_RETURN(int64_t deciders, store_.Add(Key(g, "deciders"), 1));
    if (deciders == 1) {
      SHARDKIT_RETURN_IF_ERROR(store_.Set(Key(g, "outcome"), proposal));
      return proposal;
    }
    absl::StatusOr<std::string> outcome = store_.Get(Key(g, "outcome"), kOutcomeGrace);
    if (!outcome.ok()) {
      return Annotate(outcome.status(),
                      absl::StrCat("rendezvous under \"", Generation(g),
                                   "\": the rank that decided its outcome did not record it"));
    }
    return outcome;
  }

  std::string Conflict(int64_t g) const {
    return absl::StrCat(
        kConflict, "rank ", rank_, " was claimed by two processes at the rendezvous of ", size_,
        " ranks (store keys under \"", Generation(g),
        "\"): do the --rank-offset ranges of two launches overlap? Each of ranks 0..", size_ - 1,
        " must be started once. (A job with this run id that was stopped while its ranks were "
        "joining leaves such claims behind: then pass a fresh --run-id.)");
  }

  Store& store_;
  const std::string& prefix_;
  const int rank_;
  const int size_;
  const std::string& launch_id_;
  const absl::Time deadline_;
};

}  // namespace

absl::Status AwaitMembers(Store& store, const std::string& prefix, int rank, int size,
                          absl::Time deadline) {
  auto key = [&](int r) { return absl::StrCat(prefix, "/joined/", r); };
  // Constant store traffic per rank: the last of `size` to join (the counter says which) opens
  // the gate every rank waits on. The per-rank keys are only read when naming absent ranks.
  const std::string gate = absl::StrCat(prefix, "/joined/all");
  SHARDKIT_RETURN_IF_ERROR(store.Set(key(rank), "1"));
  SHARDKIT_ASSIGN_OR_RETURN(int64_t joined, store.Add(absl::StrCat(prefix, "/joined/count"), 1));
  if (joined == size) SHARDKIT_RETURN_IF_ERROR(store.Set(gate, "1"));
  absl::Status waited = store.Wait({gate}, deadline - absl::Now());
  if (waited.ok() || waited.code() != absl::StatusCode::kDeadlineExceeded) return waited;
  return NeverJoinedError(store, size, key, prefix);
}

absl::StatusOr<std::string> JoinFreshGeneration(Store& store, const std::string& prefix, int rank,
                                                int size, const std::string& launch_id,
                                                absl::Time deadline) {
  return GenerationJoin(store, prefix, rank, size, launch_id, deadline).Run();
}

}  // namespace shardkit
