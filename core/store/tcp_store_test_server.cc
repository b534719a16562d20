// A TcpStoreServer in a process of its own, for tcp_store_test (which SIGKILLs or SIGSTOPs it):
// serves 127.0.0.1 on a free port, prints the port on a line of stdout, then serves until killed.
// It dies with its parent (PR_SET_PDEATHSIG), so it never outlives the test.
#include <signal.h>
#include <sys/prctl.h>
#include <unistd.h>

#include <cstdio>

#include "core/store/tcp_store_server.h"

int main() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  auto server = shardkit::TcpStoreServer::Start("127.0.0.1", 0);
  if (!server.ok()) {
    std::fprintf(stderr, "%s\n", server.status().ToString().c_str());
    return 1;
  }
  std::printf("%d\n", (*server)->port());
  std::fflush(stdout);
  while (true) ::pause();
}
