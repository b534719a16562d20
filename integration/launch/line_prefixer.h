// LinePrefixer: turns one rank's raw output stream into whole lines, each starting with a prefix
// such as "[rank 3] ", so lines of concurrent ranks never interleave mid-line.
//
//   LinePrefixer out("[rank 0] ");
//   std::string ready = out.Feed("hello\nwor");   // "[rank 0] hello\n"
//   ready += out.Feed("ld\n");                    // "[rank 0] world\n"
//   ready += out.Flush();                          // "" (nothing pending)
//
// A partial line is held back until its newline arrives or Flush() (at end of stream), which
// ends it with '\n'. A line longer than kMaxPending is passed through in pieces (the prefix only
// before its first piece) rather than buffered without bound.
// Thread-safety: none; one instance per stream.
#ifndef SHARDKIT_INTEGRATION_LAUNCH_LINE_PREFIXER_H_
#define SHARDKIT_INTEGRATION_LAUNCH_LINE_PREFIXER_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace shardkit::launch {

// "[rank R] ": what the launcher puts before each line rank R writes.
std::string RankLinePrefix(int rank);

class LinePrefixer {
 public:
  static constexpr size_t kMaxPending = 64 * 1024;

  explicit LinePrefixer(std::string prefix) : prefix_(std::move(prefix)) {}

  // Appends `data`; returns the text now ready to be written.
  std::string Feed(std::string_view data);
  // Returns whatever is pending as a final line ending in '\n' ("" if nothing is pending).
  std::string Flush();

 private:
  // Moves `text` to `out`, prefixed if it starts a line.
  void Emit(std::string_view text, std::string* out);

  std::string prefix_;
  std::string pending_;
  bool mid_line_ = false;  // part of the current line was already emitted
};

}  // namespace shardkit::launch

#endif  // SHARDKIT_INTEGRATION_LAUNCH_LINE_PREFIXER_H_
