// Memory figures of this process from Linux's /proc/self/status, its open file descriptors
// (/proc/self/fd) and its TCP connections, for reports (`shardkit demo`'s summary, `shardkit
// bench`'s JSON) and for tests that bound what a step allocates, opens or connects.
//
//   SHARDKIT_RETURN_IF_ERROR(ResetPeakRss());                      // VmHWM := VmRSS
//   SHARDKIT_ASSIGN_OR_RETURN(int64_t before, ProcStatusBytes("VmRSS"));
//   DoWork();
//   SHARDKIT_ASSIGN_OR_RETURN(int64_t peak, ProcStatusBytes("VmHWM"));  // peak - before: growth
#ifndef SHARDKIT_CORE_OS_PROC_STATUS_H_
#define SHARDKIT_CORE_OS_PROC_STATUS_H_

#include <cstdint>
#include <string_view>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::os {

// The field `field` ("VmRSS", "VmHWM", ...; the name before the colon, matched whole) of the text
// of a /proc/<pid>/status file, whose lines read "VmRSS:\t    1234 kB", in bytes.
// Errors: kNotFound if no line has that field; kUnavailable if its value is not "<digits> kB".
[[nodiscard]] absl::StatusOr<int64_t> StatusFieldBytes(std::string_view status_text,
                                                       std::string_view field);

// StatusFieldBytes of this process's /proc/self/status.
// Errors: as StatusFieldBytes; kUnavailable if the file cannot be read.
[[nodiscard]] absl::StatusOr<int64_t> ProcStatusBytes(std::string_view field);

// Resets this process's peak resident set size (VmHWM) to its current one (VmRSS) by writing "5"
// to /proc/self/clear_refs (Linux >= 4.0).
// Errors: kUnavailable naming the OS error where that is not allowed.
[[nodiscard]] absl::Status ResetPeakRss();

// Calls `visit` with every file descriptor this process has open (the entries of /proc/self/fd),
// except the one the listing itself uses. `visit` may close or shut down the descriptor it is
// given, but should open none (a new one may or may not be listed).
// Errors: kUnavailable if /proc/self/fd cannot be listed.
[[nodiscard]] absl::Status ForEachOpenFd(absl::FunctionRef<void(int fd)> visit);

// The connected TCP sockets (IPv4 or IPv6 streams with a peer; listening sockets are not
// counted) among this process's open file descriptors (/proc/self/fd): how many connections a rank
// holds, for `shardkit bench` and the scaling tests.
// Errors: kUnavailable if /proc/self/fd cannot be listed.
[[nodiscard]] absl::StatusOr<int> CountTcpConnections();

// Whether `fd` is a connected TCP socket as CountTcpConnections counts them.
bool IsTcpConnection(int fd);

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_PROC_STATUS_H_
