#include "core/os/proc_status.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>
#include <limits>
#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"

namespace shardkit::os {
namespace {

constexpr char kStatusPath[] = "/proc/self/status";
constexpr char kClearRefsPath[] = "/proc/self/clear_refs";
constexpr char kFdPath[] = "/proc/self/fd";

}  // namespace

absl::StatusOr<int64_t> StatusFieldBytes(std::string_view status_text,
                                         std::string_view field_name) {
  const absl::string_view field(field_name.data(), field_name.size());
  for (absl::string_view line :
       absl::StrSplit(absl::string_view(status_text.data(), status_text.size()), '\n')) {
    if (!absl::ConsumePrefix(&line, field) || !absl::ConsumePrefix(&line, ":")) continue;
    const absl::string_view written = absl::StripAsciiWhitespace(line);
    absl::string_view value = written;
    int64_t kib = 0;
    if (!absl::ConsumeSuffix(&value, "kB") ||
        !absl::SimpleAtoi(absl::StripTrailingAsciiWhitespace(value), &kib) || kib < 0 ||
        kib > std::numeric_limits<int64_t>::max() / 1024) {
      return absl::UnavailableError(
          absl::StrCat(field, " is \"", written, "\", expected a number of kB"));
    }
    return kib * 1024;
  }
  return absl::NotFoundError(absl::StrCat("no ", field, " field"));
}

absl::StatusOr<int64_t> ProcStatusBytes(std::string_view field) {
  std::ifstream in(kStatusPath);
  const std::string text(std::istreambuf_iterator<char>(in), {});
  if (in.bad() || text.empty()) {
    return absl::UnavailableError(absl::StrCat("cannot read ", kStatusPath));
  }
  absl::StatusOr<int64_t> bytes = StatusFieldBytes(text, field);
  if (!bytes.ok()) return Annotate(bytes.status(), kStatusPath);
  return bytes;
}

absl::Status ResetPeakRss() {
  const int fd = ::open(kClearRefsPath, O_WRONLY | O_CLOEXEC);
  const bool written = fd >= 0 && ::write(fd, "5", 1) == 1;
  const int error = errno;
  if (fd >= 0) ::close(fd);
  if (!written) {
    return absl::UnavailableError(
        absl::StrCat("cannot reset the peak RSS through ", kClearRefsPath, ": ", ErrnoText(error)));
  }
  return absl::OkStatus();
}

namespace {

int SocketOption(int fd, int option) {
  int value = -1;
  socklen_t size = sizeof(value);
  if (::getsockopt(fd, SOL_SOCKET, option, &value, &size) != 0) return -1;
  return value;
}

}  // namespace

absl::Status ForEachOpenFd(absl::FunctionRef<void(int fd)> visit) {
  DIR* dir = ::opendir(kFdPath);
  if (dir == nullptr) {
    return absl::UnavailableError(absl::StrCat("cannot list ", kFdPath, ": ", ErrnoText(errno)));
  }
  const int own = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    int fd = -1;
    if (absl::SimpleAtoi(entry->d_name, &fd) && fd != own) visit(fd);
  }
  ::closedir(dir);
  return absl::OkStatus();
}

bool IsTcpConnection(int fd) {
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) return false;
  const int domain = SocketOption(fd, SO_DOMAIN);
  if ((domain != AF_INET && domain != AF_INET6) || SocketOption(fd, SO_TYPE) != SOCK_STREAM ||
      SocketOption(fd, SO_ACCEPTCONN) != 0) {
    return false;
  }
  sockaddr_storage peer;
  socklen_t size = sizeof(peer);
  return ::getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &size) == 0;
}

absl::StatusOr<int> CountTcpConnections() {
  int count = 0;
  SHARDKIT_RETURN_IF_ERROR(ForEachOpenFd([&](int fd) { count += IsTcpConnection(fd); }));
  return count;
}

}  // namespace shardkit::os
