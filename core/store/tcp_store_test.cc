// TcpStore and TcpStoreServer over real sockets on 127.0.0.1: the Store contract (through tcp://
// URLs, a fresh prefix per test), hostile clients that must not hang or crash the server, a server
// process that dies or stops (SIGKILL/SIGSTOP), and connecting before the server is up.
#include "core/store/tcp_store.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/check.h"
#include "core/os/socket.h"
#include "core/store/internal/tcp_socket.h"
#include "core/store/internal/tcp_wire.h"
#include "core/store/store_contract_test.h"
#include "core/store/store_url.h"
#include "core/store/tcp_store_server.h"
#include "gmock/gmock.h"
#include "testing/status_matchers.h"

extern char** environ;

namespace shardkit::testing {
namespace {

namespace net = ::shardkit::internal;
namespace wire = ::shardkit::internal::tcp_wire;
using ::absl::StatusCode;
using ::testing::AllOf;
using ::testing::HasSubstr;

TcpStoreServer& SharedServer() {
  static TcpStoreServer* server = [] {
    auto started = TcpStoreServer::Start("127.0.0.1", 0);
    SHARDKIT_CHECK(started.ok()) << started.status();
    return started->release();  // serves until the test process exits
  }();
  return *server;
}

std::string Url(int port) { return absl::StrCat("tcp://127.0.0.1:", port); }

std::shared_ptr<Store> MakeTcpStore() {
  static int counter = 0;
  auto store = OpenStore(absl::StrCat(Url(SharedServer().port()), "/contract/", ++counter));
  EXPECT_THAT(store, IsOk());
  return store.ok() ? std::shared_ptr<Store>(*std::move(store)) : nullptr;
}

INSTANTIATE_TEST_SUITE_P(Tcp, StoreContractTest,
                         ::testing::Values(StoreFactory{"tcp", &MakeTcpStore}), StoreFactoryName);

// A raw client speaking (or not) the protocol.
os::Fd RawConnect(int port) {
  auto fd = os::ConnectTcp("127.0.0.1", port, absl::Now() + absl::Seconds(5));
  EXPECT_THAT(fd, IsOk());
  return fd.ok() ? *std::move(fd) : os::Fd();
}

void RawSend(const os::Fd& fd, std::string_view bytes) {
  ASSERT_THAT(net::SendAll(fd.get(), bytes, absl::Now() + absl::Seconds(5)), IsOk());
}

// Whether the server closed `fd` (rather than leaving it open) within 5 s.
bool ClosedByServer(const os::Fd& fd) {
  auto reply = net::RecvFrame(fd.get(), wire::kMaxFrame, absl::Now() + absl::Seconds(5));
  return absl::IsUnavailable(reply.status());  // closed or reset, not timed out
}

// A store on the shared server still answers promptly.
void ExpectServerAnswers() {
  const absl::Time start = absl::Now();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      auto store, TcpStore::Connect("127.0.0.1", SharedServer().port(), absl::Seconds(5)));
  ASSERT_THAT(store->Set("alive", "yes"), IsOk());
  EXPECT_THAT(store->Get("alive", absl::Seconds(1)), IsOkAndHolds("yes"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(TcpStoreServerTest, GarbageClosesOnlyThatConnection) {
  const std::vector<std::string> garbage = {
      "GET / HTTP/1.1\r\nHost: x\r\n\r\n",                    // announces a 1.2 GB frame
      std::string("\0\0\0\0", 4),                             // an empty frame
      wire::EncodeFrame("\x07xyz"),                           // an unknown op
      wire::EncodeFrame(wire::EncodeGet("k")),                // no hello first
      wire::EncodeFrame(std::string("\x01\0\0\0\x05hi", 7)),  // a field longer than its frame
      wire::EncodeFrame(wire::EncodeHello() + "trailing"),    // trailing bytes
  };
  for (const std::string& bytes : garbage) {
    os::Fd fd = RawConnect(SharedServer().port());
    RawSend(fd, bytes);
    EXPECT_TRUE(ClosedByServer(fd)) << absl::CHexEscape(bytes);
  }
  ExpectServerAnswers();
}

TEST(TcpStoreServerTest, SilentAndHalfSentClientsBlockNobody) {
  os::Fd silent = RawConnect(SharedServer().port());
  os::Fd half = RawConnect(SharedServer().port());
  RawSend(half, wire::EncodeFrame(wire::EncodeHello()));
  ASSERT_THAT(net::RecvFrame(half.get(), wire::kMaxFrame, absl::Now() + absl::Seconds(5)), IsOk());
  RawSend(half, wire::EncodeFrame(wire::EncodeSet("k", std::string(1000, 'v'))).substr(0, 100));
  ExpectServerAnswers();
}

TEST(TcpStoreServerTest, ClientsThatVanishMidRequestAreForgotten) {
  const std::string set = wire::EncodeFrame(wire::EncodeSet("vanish", std::string(1 << 16, 'v')));
  for (int i = 0; i < 50; ++i) {
    os::Fd fd = RawConnect(SharedServer().port());
    RawSend(fd, wire::EncodeFrame(wire::EncodeHello()) + set.substr(0, 10 + i * 997));
    // Reset instead of FIN on every other one.
    if (i % 2 == 1) {
      linger reset{1, 0};
      ::setsockopt(fd.get(), SOL_SOCKET, SO_LINGER, &reset, sizeof(reset));
    }
  }
  ExpectServerAnswers();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto store, OpenStore(Url(SharedServer().port())));
  EXPECT_THAT(store->Check({"vanish"}), IsOkAndHolds(false));  // no partial request applied
}

TEST(TcpStoreServerTest, AwaitNoClientsWaitsForTheLastToLeave) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto server, TcpStoreServer::Start("127.0.0.1", 0));
  EXPECT_TRUE(server->AwaitNoClients(absl::Now()));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto store, OpenStore(Url(server->port())));
  ASSERT_THAT(store->Set("k", "v"), IsOk());  // answered: the server holds the connection
  EXPECT_FALSE(server->AwaitNoClients(absl::Now() + absl::Milliseconds(50)));
  std::thread leave([&store] {
    absl::SleepFor(absl::Milliseconds(100));
    store.reset();
  });
  const absl::Time start = absl::Now();
  EXPECT_TRUE(server->AwaitNoClients(start + absl::Seconds(10)));
  EXPECT_LT(absl::Now() - start, absl::Seconds(5));
  leave.join();
}

TEST(TcpStoreServerTest, AClientThatNeverReadsItsRepliesBlocksNobody) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto store, OpenStore(Url(SharedServer().port())));
  ASSERT_THAT(store->Set("big", std::string(4 << 20, 'b')), IsOk());
  os::Fd greedy = RawConnect(SharedServer().port());
  std::string requests = wire::EncodeFrame(wire::EncodeHello());
  for (int i = 0; i < 64; ++i) requests += wire::EncodeFrame(wire::EncodeGet("big"));
  std::thread sender([&] {  // blocks once the server stops reading from it
    (void)net::SendAll(greedy.get(), requests, absl::Now() + absl::Seconds(3));
  });
  absl::SleepFor(absl::Milliseconds(200));
  ExpectServerAnswers();
  sender.join();
}

TEST(TcpStoreServerTest, ServerChecksKeysOfRawRequests) {
  os::Fd fd = RawConnect(SharedServer().port());
  RawSend(fd, wire::EncodeFrame(wire::EncodeHello()) + wire::EncodeFrame(wire::EncodeSet("", "v")));
  const absl::Time deadline = absl::Now() + absl::Seconds(5);
  ASSERT_THAT(net::RecvFrame(fd.get(), wire::kMaxFrame, deadline), IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::string reply,
                                net::RecvFrame(fd.get(), wire::kMaxFrame, deadline));
  wire::Reader reader(reply);
  EXPECT_EQ(reader.Byte(), 1);
  EXPECT_EQ(reader.Byte(), static_cast<uint8_t>(StatusCode::kInvalidArgument));
  EXPECT_EQ(reader.String(), "empty key");
}

TEST(TcpStoreServerTest, ManyConnectionsAddAtomically) {
  constexpr int kClients = 24;
  std::vector<std::thread> threads;
  for (int t = 0; t < kClients; ++t) {
    threads.emplace_back([] {
      auto store = OpenStore(Url(SharedServer().port()) + "/many");
      ASSERT_THAT(store, IsOk());
      for (int i = 0; i < 50; ++i) ASSERT_THAT((*store)->Add("n", 1), IsOk());
    });
  }
  for (std::thread& thread : threads) thread.join();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto store, OpenStore(Url(SharedServer().port()) + "/many"));
  EXPECT_THAT(store->Add("n", 0), IsOkAndHolds(kClients * 50));
}

TEST(TcpStoreTest, OversizedKeysAndValuesAreRefusedByTheClient) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto store, OpenStore(Url(SharedServer().port())));
  EXPECT_THAT(store->Set("huge", std::string(wire::kMaxValue + 1, 'x')),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("over the limits")));
  const std::string long_key(wire::kMaxKey + 1, 'k');
  EXPECT_THAT(store->Get(long_key, absl::Seconds(1)),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("(4097 bytes)")));
  EXPECT_THAT(store->Add(long_key, 1),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("over the limits")));
  EXPECT_THAT(store->Check({long_key}),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("over the limits")));
  EXPECT_THAT(store->Set("fine", "still connected"), IsOk());
}

TEST(TcpStoreTest, ConnectWaitsForALateServer) {
  int port = 0;
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(auto probe, TcpStoreServer::Start("127.0.0.1", 0));
    port = probe->port();  // free again once the probe is gone
  }
  std::unique_ptr<TcpStoreServer> late;
  std::thread starter([&] {
    absl::SleepFor(absl::Milliseconds(300));
    auto started = TcpStoreServer::Start("127.0.0.1", port);
    ASSERT_THAT(started, IsOk());
    late = *std::move(started);
  });
  auto store = TcpStore::Connect("127.0.0.1", port, absl::Seconds(10));
  starter.join();
  ASSERT_THAT(store, IsOk());
  EXPECT_THAT((*store)->Add("joined", 1), IsOkAndHolds(1));
}

TEST(TcpStoreTest, NobodyListeningFailsAtTheDeadlineNamingTheStore) {
  int port = 0;
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(auto probe, TcpStoreServer::Start("127.0.0.1", 0));
    port = probe->port();
  }
  const absl::Time start = absl::Now();
  EXPECT_THAT(TcpStore::Connect("127.0.0.1", port, absl::Milliseconds(400)),
              StatusIs(StatusCode::kUnavailable,
                       AllOf(HasSubstr(absl::StrCat("TcpStore(", Url(port), ")")),
                             HasSubstr("cannot connect within"), HasSubstr("refused"))));
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(400));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
}

TEST(TcpStoreTest, NotAStoreIsDataLoss) {
  auto listen = os::ListenTcp("127.0.0.1", 0);
  ASSERT_THAT(listen, IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(int port, os::BoundPort(listen->get()));
  std::thread impostor([&] {
    pollfd ready{listen->get(), POLLIN, 0};
    ::poll(&ready, 1, 5000);
    const int fd = ::accept4(listen->get(), nullptr, nullptr, 0);
    os::Fd client(fd);
    if (fd >= 0) (void)net::SendAll(fd, "HTTP/1.1 400 Bad\r\n\r\n", absl::Now() + absl::Seconds(5));
    absl::SleepFor(absl::Milliseconds(200));
  });
  EXPECT_THAT(TcpStore::Connect("127.0.0.1", port, absl::Seconds(5)),
              StatusIs(StatusCode::kDataLoss, HasSubstr("not a shardkit tcp store")));
  impostor.join();
}

// A server in a process of its own (tcp_store_test_server); this test is the client.
struct ChildServer {
  pid_t pid = -1;
  int port = 0;
};

ChildServer SpawnServer() {
  const std::string bin =
      absl::StrCat(std::getenv("TEST_SRCDIR"), "/shardkit/core/store/tcp_store_test_server");
  int fds[2];
  EXPECT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  char* argv[] = {const_cast<char*>(bin.c_str()), nullptr};
  ChildServer child;
  EXPECT_EQ(::posix_spawn(&child.pid, bin.c_str(), &actions, nullptr, argv, environ), 0) << bin;
  posix_spawn_file_actions_destroy(&actions);
  ::close(fds[1]);
  char line[16] = {};
  ssize_t got = 0, n = 0;
  while (got < 15 && (n = ::read(fds[0], line + got, 15 - got)) > 0 && line[got + n - 1] != '\n') {
    got += n;
  }
  ::close(fds[0]);
  child.port = std::atoi(line);
  return child;
}

void Reap(const ChildServer& child) {
  ::kill(child.pid, SIGKILL);
  ::waitpid(child.pid, nullptr, 0);
}

TEST(TcpStoreTest, AServerThatDiesFailsEveryWaiterAtOnceNamingTheStore) {
  const ChildServer child = SpawnServer();
  ASSERT_GT(child.port, 0);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto waiter, OpenStore(Url(child.port) + "/job"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto setter, OpenStore(Url(child.port) + "/job"));
  ASSERT_THAT(setter->Set("rank1/addr", "x"), IsOk());
  absl::Status waited;
  absl::Time failed;
  std::thread wait([&] {
    waited = waiter->Wait({"rank1/addr", "rank2/addr"}, absl::Seconds(30));
    failed = absl::Now();
  });
  absl::SleepFor(absl::Milliseconds(200));
  const absl::Time killed = absl::Now();
  Reap(child);
  wait.join();
  EXPECT_THAT(waited, StatusIs(StatusCode::kUnavailable,
                               AllOf(HasSubstr(absl::StrCat("TcpStore(", Url(child.port), ")")),
                                     HasSubstr("did the process serving the store exit"))));
  EXPECT_LT(failed - killed, absl::Seconds(2));
  // Add is not retried on a broken connection (it may have been applied); the next request's
  // fresh connection is refused.
  EXPECT_THAT(setter->Add("n", 1), StatusIs(StatusCode::kUnavailable, HasSubstr("ADD \"job/n\"")));
  EXPECT_THAT(setter->Set("k", "v"), StatusIs(StatusCode::kUnavailable, HasSubstr("refused")));
}

TEST(TcpStoreTest, AStoppedServerIsADeadlineNotAHang) {
  const ChildServer child = SpawnServer();
  ASSERT_GT(child.port, 0);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      auto store, TcpStore::Connect("127.0.0.1", child.port, absl::Milliseconds(500)));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto patient,
                                TcpStore::Connect("127.0.0.1", child.port, absl::Seconds(30)));
  ASSERT_THAT(store->Set("k", "v"), IsOk());
  ::kill(child.pid, SIGSTOP);
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child.pid, &wstatus, WUNTRACED), child.pid);  // stopped for sure
  ASSERT_TRUE(WIFSTOPPED(wstatus));
  absl::Time start = absl::Now();
  EXPECT_THAT(store->Get("k", absl::Seconds(30)),  // bounded by the store's timeout
              StatusIs(StatusCode::kDeadlineExceeded,
                       AllOf(HasSubstr(Url(child.port)), HasSubstr("no reply within 50"))));
  EXPECT_LT(absl::Now() - start, absl::Seconds(3));
  start = absl::Now();
  EXPECT_THAT(patient->Wait({"k"}, absl::Milliseconds(300)),  // and by the caller's deadline
              StatusIs(StatusCode::kDeadlineExceeded, HasSubstr("no reply within 3")));
  EXPECT_LT(absl::Now() - start, absl::Seconds(2));
  Reap(child);
}

TEST(TcpStoreTest, RankZeroServesAndOthersConnect) {
  int port = 0;
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(auto probe, TcpStoreServer::Start("127.0.0.1", 0));
    port = probe->port();
  }
  const std::string url = Url(port) + "/run";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto rank0, OpenStoreAsRank(url, 0, absl::Seconds(5)));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto again, OpenStoreAsRank(url, 0, absl::Seconds(5)));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(auto rank1, OpenStoreAsRank(url, 1, absl::Seconds(5)));
  ASSERT_THAT(rank0->Set("k", "from 0"), IsOk());
  EXPECT_THAT(rank1->Get("k", absl::Seconds(1)), IsOkAndHolds("from 0"));
  EXPECT_THAT(again->Add("n", 2), IsOkAndHolds(2));
  EXPECT_THAT(OpenStore("tcp://127.0.0.1:0"),
              StatusIs(StatusCode::kInvalidArgument, HasSubstr("shardkit launch")));
}

TEST(TcpStoreTest, RankZeroOnAnotherHostIsRefused) {
  // 192.0.2.1 (RFC 5737 TEST-NET-1) is no address of this machine.
  EXPECT_THAT(
      OpenStoreAsRank("tcp://192.0.2.1:29500", 0, absl::Seconds(1)),
      StatusIs(StatusCode::kInvalidArgument, AllOf(HasSubstr("tcp://192.0.2.1:29500"),
                                                   HasSubstr("not an address of this machine"))));
}

}  // namespace
}  // namespace shardkit::testing
