// ErrorLines: what a command that relaunches itself on N local ranks (`shardkit shard --nproc N`,
// `reshard`, `demo`: RunOptions::error_prefix) makes of its ranks' stderr, so that an error every
// rank reports is printed once, with the ranks that reported it, instead of N times.
//
//   ErrorLines errors("shardkit shard: ", absl::Seconds(2));
//   write(2, errors.Feed(rank, prefixer.Feed(data), absl::Now()));   // each stderr read
//   write(2, errors.ReleaseDue(absl::Now()));                        // each loop turn
//   errors.StreamEnded(rank);                                        // its stderr reached EOF
//   write(2, errors.Finish(outcome.ranks));                          // every rank has ended
//
// A failing rank's error is the last line it writes, and it starts with the command's prefix
// ("shardkit shard: ", as ReportError writes it). So every stderr line goes out live, behind its
// "[rank R] " prefix, except a line that starts with that prefix: it is held while it may still be
// the rank's last — until the rank writes another line, or for at most `hold` while the rank's
// stderr is open (progress lines share the prefix: they appear at most `hold` late, and as soon
// as the next line comes). When every rank has ended, Finish prints the held lines of the ranks
// that exited with a non-zero code once per distinct text, with their ranks in FormatRanks' words:
//
//   ranks 0-2: shardkit shard: applying the plan to the checkpoint: …
//   rank 3: shardkit shard: rank 3: out: cannot create …
//
// in place of the launcher's "shardkit launch: rank R exited with code C" lines, which remain for
// a rank that failed without such a line. Held lines of ranks that succeeded, were stopped by the
// launcher or died by a signal are printed as they would have been, prefixed. Should a rank take
// longer than `hold` to exit after writing its error, the error goes out live and its exit line
// stays: nothing is lost, only not collapsed.
// Thread-safety: none; one instance per run, used by its supervising thread.
#ifndef SHARDKIT_INTEGRATION_LAUNCH_ERROR_LINES_H_
#define SHARDKIT_INTEGRATION_LAUNCH_ERROR_LINES_H_

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/time/time.h"
#include "integration/launch/rank_processes.h"

namespace shardkit::launch {

class ErrorLines {
 public:
  ErrorLines(std::string error_prefix, absl::Duration hold)
      : error_prefix_(std::move(error_prefix)), hold_(hold) {}

  // `text`: what rank `rank`'s stderr LinePrefixer (prefix RankLinePrefix(rank)) gave — whole
  // lines, or a piece of an over-long one. Returns the text to write now, in order.
  std::string Feed(int rank, std::string_view text, absl::Time now);

  // The rank's stderr reached end of file: its held line, if any, waits for Finish.
  void StreamEnded(int rank);

  // The held lines of open streams held since `hold` before `now` or earlier.
  std::string ReleaseDue(absl::Time now);
  // When ReleaseDue next has something to release (nullopt: nothing is held on an open stream).
  std::optional<absl::Time> NextDue() const;

  // After every rank ended (`ranks`: their outcomes, ascending rank): the remaining held lines,
  // the failed ranks' errors grouped by text, and FailureLine for each rank that exited with a
  // non-zero code and left no held line. Each line ends in '\n'.
  std::string Finish(const std::vector<RankOutcome>& ranks);

 private:
  struct Held {
    std::string line;  // as the prefixer gave it: "[rank R] shardkit shard: …\n"
    absl::Time since;
    bool stream_ended = false;
  };

  // Moves rank's held line (if any) to `out`.
  void Release(int rank, std::string* out);

  std::string error_prefix_;
  absl::Duration hold_;
  std::map<int, Held> held_;  // by rank
};

}  // namespace shardkit::launch

#endif  // SHARDKIT_INTEGRATION_LAUNCH_ERROR_LINES_H_
