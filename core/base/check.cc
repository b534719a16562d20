#include "core/base/check.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <string>

namespace shardkit::internal {
namespace {

char SeverityLetter(LogSeverity severity) {
  switch (severity) {
    case LogSeverity::kInfo:
      return 'I';
    case LogSeverity::kWarning:
      return 'W';
    case LogSeverity::kError:
      return 'E';
    case LogSeverity::kFatal:
      return 'F';
  }
  return '?';
}

}  // namespace

LogMessage::LogMessage(LogSeverity severity, const char* file, int line) : severity_(severity) {
  const char* base = std::strrchr(file, '/');
  stream_ << "[shardkit " << SeverityLetter(severity) << " " << (base ? base + 1 : file) << ":"
          << line << "] ";
}

LogMessage::~LogMessage() {
  std::string text = stream_.str();
  text.push_back('\n');
  // One write so that lines of concurrent threads and ranks do not interleave.
  ssize_t ignored = ::write(STDERR_FILENO, text.data(), text.size());
  (void)ignored;
  if (severity_ == LogSeverity::kFatal) std::abort();
}

}  // namespace shardkit::internal
