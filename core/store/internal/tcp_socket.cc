#include "core/store/internal/tcp_socket.h"

#include "absl/strings/str_cat.h"
#include "core/os/socket.h"
#include "core/store/internal/tcp_wire.h"

namespace shardkit::internal {

absl::Status SendAll(int fd, std::string_view bytes, absl::Time deadline) {
  return os::SendAll(fd, bytes.data(), bytes.size(), deadline);
}

absl::StatusOr<std::string> RecvFrame(int fd, size_t max_body, absl::Time deadline) {
  char header[tcp_wire::kHeaderBytes];
  if (absl::Status s = os::RecvAll(fd, header, sizeof(header), deadline); !s.ok()) return s;
  const uint32_t size = tcp_wire::DecodeLength(std::string_view(header, sizeof(header)));
  if (size == 0 || size > max_body) {
    return absl::DataLossError(absl::StrCat("a reply announces ", size, " bytes (at most ",
                                            max_body, "): not a shardkit tcp store"));
  }
  std::string body(size, '\0');
  if (absl::Status s = os::RecvAll(fd, body.data(), size, deadline); !s.ok()) return s;
  return body;
}

}  // namespace shardkit::internal
