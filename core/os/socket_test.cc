// The socket helpers on loopback: connect, accept, whole-buffer transfers, and the errors callers
// rely on (a closed peer, a deadline, a port in use, a name that does not resolve).
#include "core/os/socket.h"

#include <netinet/in.h>

#include <cstring>
#include <string>
#include <thread>

#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/status_matchers.h"

namespace shardkit::os {
namespace {

using ::testing::HasSubstr;
using testing::IsOk;
using testing::StatusIs;

absl::Time Soon() { return absl::Now() + absl::Seconds(5); }

TEST(SocketTest, ConnectsAcceptsAndMovesBytes) {
  absl::StatusOr<Fd> listen = ListenTcp("127.0.0.1", 0);
  ASSERT_THAT(listen, IsOk());
  absl::StatusOr<int> port = BoundPort(listen->get());
  ASSERT_THAT(port, IsOk());
  absl::StatusOr<Fd> client = ConnectTcp("127.0.0.1", *port, Soon());
  ASSERT_THAT(client, IsOk());
  absl::StatusOr<Fd> server = AcceptOne(listen->get(), Soon());
  ASSERT_THAT(server, IsOk());
  const std::string sent(1 << 20, 'x');  // more than the socket buffers hold at once
  std::string received(sent.size(), '\0');
  std::thread writer(
      [&] { EXPECT_THAT(SendAll(client->get(), sent.data(), sent.size(), Soon()), IsOk()); });
  EXPECT_THAT(RecvAll(server->get(), received.data(), received.size(), Soon()), IsOk());
  writer.join();
  EXPECT_EQ(received, sent);

  char byte;
  EXPECT_THAT(RecvSome(server->get(), &byte, 1, "rank 1"), testing::IsOkAndHolds(0u));
  EXPECT_THAT(RecvAll(server->get(), &byte, 1, absl::Now() + absl::Milliseconds(20)),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("timed out receiving")));
  client->reset();
  EXPECT_THAT(RecvAll(server->get(), &byte, 1, Soon()),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("closed by the other side")));
  EXPECT_THAT(RecvSome(server->get(), &byte, 1, "rank 1"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("rank 1 went away")));
}

TEST(SocketTest, ListenErrors) {
  absl::StatusOr<Fd> first = ListenTcp("127.0.0.1", 0);
  ASSERT_THAT(first, IsOk());
  const int port = *BoundPort(first->get());
  EXPECT_THAT(ListenTcp("127.0.0.1", port),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("cannot listen")));
  EXPECT_THAT(ConnectTcp("no-such-host.invalid", port, Soon()),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("cannot resolve")));
  EXPECT_THAT(AcceptOne(first->get(), absl::Now()),
              StatusIs(absl::StatusCode::kDeadlineExceeded, HasSubstr("waiting for connections")));
}

TEST(SocketTest, ListenEphemeralReportsItsAddress) {
  sockaddr_storage address{};
  auto* in = reinterpret_cast<sockaddr_in*>(&address);
  in->sin_family = AF_INET;
  in->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  absl::StatusOr<Listener> listener = ListenEphemeral(address, 4);
  ASSERT_THAT(listener, IsOk());
  EXPECT_EQ(listener->host, "127.0.0.1");
  EXPECT_GT(listener->port, 0);
  EXPECT_THAT(ConnectTcp(listener->host, listener->port, Soon()), IsOk());
  address.ss_family = AF_UNIX;
  EXPECT_THAT(ListenEphemeral(address, 4),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("address family")));
}

}  // namespace
}  // namespace shardkit::os
