// A tiny logging and invariant-check facility (Debian's Abseil has no absl/log).
//
// SHARDKIT_CHECK is for shardkit's own invariants only: a failure is a bug in shardkit and aborts
// with file, line and message. User input is never checked with it; that returns absl::Status.
//
//   SHARDKIT_CHECK(offset <= size) << "offset " << offset;
//   SHARDKIT_LOG(WARNING) << "plan rule " << i << " matches no parameter";
#ifndef SHARDKIT_CORE_BASE_CHECK_H_
#define SHARDKIT_CORE_BASE_CHECK_H_

#include <sstream>

namespace shardkit {

enum class LogSeverity { kInfo, kWarning, kError, kFatal };

namespace internal {

// Collects one message and writes it to stderr on destruction ("[shardkit W file:line] msg");
// aborts for kFatal. Thread-safe: each message is written with a single write(2).
class LogMessage {
 public:
  LogMessage(LogSeverity severity, const char* file, int line);
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  ~LogMessage();
  std::ostream& stream() { return stream_; }

 private:
  LogSeverity severity_;
  std::ostringstream stream_;
};

// Makes `cond ? (void)0 : Voidify() & stream` well-formed.
struct Voidify {
  void operator&(std::ostream&) {}
};

}  // namespace internal
}  // namespace shardkit

#define SHARDKIT_LOG_SEVERITY_INFO ::shardkit::LogSeverity::kInfo
#define SHARDKIT_LOG_SEVERITY_WARNING ::shardkit::LogSeverity::kWarning
#define SHARDKIT_LOG_SEVERITY_ERROR ::shardkit::LogSeverity::kError
#define SHARDKIT_LOG_SEVERITY_FATAL ::shardkit::LogSeverity::kFatal

#define SHARDKIT_LOG(severity) \
  ::shardkit::internal::LogMessage(SHARDKIT_LOG_SEVERITY_##severity, __FILE__, __LINE__).stream()

#define SHARDKIT_CHECK(cond)                                                                      \
  (cond)                                                                                          \
      ? (void)0                                                                                   \
      : ::shardkit::internal::Voidify() &                                                         \
            ::shardkit::internal::LogMessage(::shardkit::LogSeverity::kFatal, __FILE__, __LINE__) \
                    .stream()                                                                     \
                << "Check failed: " #cond " "

#endif  // SHARDKIT_CORE_BASE_CHECK_H_
