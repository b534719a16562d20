#include "testing/redis_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <string_view>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace shardkit::testing {
namespace {

std::string FindOnPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  for (absl::string_view dir :
       absl::StrSplit(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", ':')) {
    std::string candidate = absl::StrCat(dir, "/", name);
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

// A port the kernel just handed out on 127.0.0.1 (free now; a race is possible but unlikely).
int FreeLoopbackPort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(addr);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

bool Accepts(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(static_cast<uint16_t>(port));
  bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
  ::close(fd);
  return ok;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RedisServer>> RedisServer::Start(std::string dir) {
  std::string binary = FindOnPath("redis-server");
  if (binary.empty()) return absl::NotFoundError("redis-server is not installed (tools/setup)");
  int port = FreeLoopbackPort();
  if (port < 0) return absl::UnavailableError("no free loopback port");
  std::unique_ptr<RedisServer> server(new RedisServer(std::move(binary), std::move(dir), port));
  if (absl::Status started = server->Restart(); !started.ok()) return started;
  return server;
}

RedisServer::RedisServer(std::string binary, std::string dir, int port)
    : binary_(std::move(binary)), dir_(std::move(dir)), port_(port) {}

RedisServer::~RedisServer() { Stop(); }

std::string RedisServer::url() const { return absl::StrCat("redis://127.0.0.1:", port_); }

void RedisServer::Stop() {
  if (pid_ <= 0) return;
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
  pid_ = -1;
}

absl::Status RedisServer::Restart() {
  Stop();
  const std::string port = absl::StrCat(port_);
  const std::string log = absl::StrCat(dir_, "/redis-", port_, ".log");
  std::vector<std::string> args = {binary_,  "--port", port,          "--bind", "127.0.0.1",
                                   "--save", "",       "--appendonly", "no",    "--dir",
                                   dir_,     "--logfile", log};
  pid_ = ::fork();
  if (pid_ < 0) return absl::UnavailableError("fork failed");
  if (pid_ == 0) {
    std::vector<char*> argv;
    for (std::string& arg : args) argv.push_back(arg.data());
    argv.push_back(nullptr);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (Accepts(port_)) return absl::OkStatus();
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) {
      pid_ = -1;
      return absl::UnavailableError(absl::StrCat("redis-server exited at start; see ", log));
    }
    absl::SleepFor(absl::Milliseconds(5));
  }
  Stop();
  return absl::UnavailableError(absl::StrCat("redis-server did not listen on port ", port_));
}

}  // namespace shardkit::testing
