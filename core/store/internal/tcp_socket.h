// Frames of the tcp:// store's wire protocol (tcp_wire.h) on a socket (core/os/socket.h), not
// part of the API.
//
//   SHARDKIT_ASSIGN_OR_RETURN(os::Fd fd, os::ConnectTcp("10.0.0.5", 29500, deadline));
//   SHARDKIT_RETURN_IF_ERROR(SendFrame(fd.get(), body, deadline));
//   SHARDKIT_ASSIGN_OR_RETURN(std::string reply, RecvFrame(fd.get(), kMaxFrame, deadline));
//
// Messages are bare reasons ("the connection was closed by the other side"); callers prefix the
// store's name.
#ifndef SHARDKIT_CORE_STORE_INTERNAL_TCP_SOCKET_H_
#define SHARDKIT_CORE_STORE_INTERNAL_TCP_SOCKET_H_

#include <cstddef>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace shardkit::internal {

// Sends `bytes` whole on a non-blocking socket (os::SendAll). Errors: as os::SendAll.
[[nodiscard]] absl::Status SendAll(int fd, std::string_view bytes, absl::Time deadline);

// Receives one frame's body (at most `max_body` bytes). Errors: as os::RecvAll; kDataLoss if the
// frame announces an empty or oversized body.
[[nodiscard]] absl::StatusOr<std::string> RecvFrame(int fd, size_t max_body, absl::Time deadline);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_STORE_INTERNAL_TCP_SOCKET_H_
