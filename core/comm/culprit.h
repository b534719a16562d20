// Culprit: the rank a failed collective blames, carried inside its absl::Status (a payload, kept
// by Annotate), so that a caller can lead its error with the same words on every rank (weight
// sync does: "Sync failed: rank 3 went away without closing its communicator (killed or
// crashed?)"). Backends attach it when they know: a peer seen to vanish, a gave-up marker's
// cause, or a stalled rank found after a deadline.
#ifndef SHARDKIT_CORE_COMM_CULPRIT_H_
#define SHARDKIT_CORE_COMM_CULPRIT_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"

namespace shardkit {

struct Culprit {
  enum class How {
    kVanished,  // its connections ended without a word: killed or crashed
    kLeft,      // a connection of it closed early: it went away or gave up (cannot tell which)
    kStalled,   // it stopped making progress: the ranks waiting on it reached their deadline
    // it was interrupted: its program abandoned the call (Communicator::Abort, e.g. on Ctrl-C)
    kInterrupted,
  };
  int rank = -1;
  How how = How::kVanished;

  bool operator==(const Culprit&) const = default;
};

// Why an interrupted rank (kInterrupted) left, as the descriptions below put it after "rank 3 was
// interrupted".
inline constexpr char kInterruptedWhy[] = " (Ctrl-C, or its program called Communicator::Abort)";

// Attaches `culprit` to a non-OK `status` (replacing one attached earlier).
void SetCulprit(absl::Status& status, const Culprit& culprit);

// The culprit attached to `status`, if any.
std::optional<Culprit> GetCulprit(const absl::Status& status);

// "rank 3 went away without closing its communicator (killed or crashed?)", "rank 3 went away or
// gave up", "rank 3 stopped making progress (stalled? the ranks waiting on it reached their
// deadline)", "rank 3 was interrupted (Ctrl-C, or its program called Communicator::Abort)".
std::string DescribeCulprit(const Culprit& culprit);

// `status` led by a first line that is the same on every rank when a culprit is attached:
// "<what> failed: <DescribeCulprit>", then this rank's own message on the next line. Without a
// culprit (or OK) `status` unchanged.
absl::Status LeadWithCulprit(const absl::Status& status, std::string_view what);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_CULPRIT_H_
