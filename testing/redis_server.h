// RedisServer: a real redis-server child process on a free loopback port, for tests of
// RedisStore and of multi-host launches. No persistence; killed and reaped on destruction.
//
//   absl::StatusOr<std::unique_ptr<RedisServer>> server = RedisServer::Start(dir);
//   if (absl::IsNotFound(server.status())) GTEST_SKIP() << server.status();
//   std::string url = (*server)->url();  // "redis://127.0.0.1:<port>"
//
// Thread-safety: not thread-safe; use from the test's main thread.
#ifndef SHARDKIT_TESTING_REDIS_SERVER_H_
#define SHARDKIT_TESTING_REDIS_SERVER_H_

#include <sys/types.h>

#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace shardkit::testing {

class RedisServer {
 public:
  // Starts redis-server (found on PATH) with its working directory and log in `dir`, and waits
  // until it accepts connections. Errors: kNotFound if redis-server is not installed;
  // kUnavailable if it does not come up within 10 s.
  [[nodiscard]] static absl::StatusOr<std::unique_ptr<RedisServer>> Start(std::string dir);
  ~RedisServer();

  int port() const { return port_; }
  std::string url() const;

  // Kills the server (SIGKILL) and reaps it; the port stays reserved for Restart.
  void Stop();
  // Starts a fresh (empty) server on the same port. Errors: as Start.
  [[nodiscard]] absl::Status Restart();

 private:
  RedisServer(std::string binary, std::string dir, int port);

  std::string binary_;
  std::string dir_;
  int port_;
  pid_t pid_ = -1;
};

}  // namespace shardkit::testing

#endif  // SHARDKIT_TESTING_REDIS_SERVER_H_
