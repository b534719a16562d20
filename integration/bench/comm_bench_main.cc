// Stand-alone driver: forks N local ranks over a fresh FileStore and prints one JSON line per rank.
//
//   bazel run -c opt //integration/bench:comm_bench -- 4 64 broadcast
//   (arguments: NPROC MIB broadcast|scatter [REPEATS])
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/registry.h"
#include "integration/bench/comm_bench.h"

namespace {

int RankMain(int rank, int nproc, const std::string& store_url,
             const shardkit::bench::CommBenchOptions& options) {
  shardkit::ConnectOptions connect;
  connect.rank = rank;
  connect.world_size = nproc;
  connect.store_url = store_url;
  auto comm = shardkit::Connect(connect);
  if (!comm.ok()) {
    std::cerr << "rank " << rank << ": " << comm.status() << "\n";
    return 1;
  }
  auto result = shardkit::bench::RunCommBench(**comm, options);
  if (!result.ok()) {
    std::cerr << "rank " << rank << ": " << result.status() << "\n";
    return 1;
  }
  std::cout << result->ToJson() << std::endl;
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  int nproc = 0;
  shardkit::bench::CommBenchOptions options;
  if (argc < 4 || !absl::SimpleAtoi(argv[1], &nproc) || nproc < 1 ||
      !absl::SimpleAtoi(argv[2], &options.mib) ||
      (std::string(argv[3]) != "broadcast" && std::string(argv[3]) != "scatter") ||
      (argc > 4 && !absl::SimpleAtoi(argv[4], &options.repeats))) {
    std::cerr << "usage: comm_bench NPROC MIB broadcast|scatter [REPEATS]\n";
    return 2;
  }
  options.pattern = std::string(argv[3]) == "broadcast" ? shardkit::bench::CommPattern::kBroadcast
                                                        : shardkit::bench::CommPattern::kScatter;
  const std::string dir =
      absl::StrCat(std::filesystem::temp_directory_path().string(), "/shardkit-bench-", getpid());
  std::filesystem::create_directories(dir);
  std::vector<pid_t> pids;
  for (int rank = 0; rank < nproc; ++rank) {
    const pid_t pid = fork();
    if (pid == 0) _exit(RankMain(rank, nproc, "file://" + dir, options));
    pids.push_back(pid);
  }
  int failed = 0;
  for (pid_t pid : pids) {
    int status = 0;
    waitpid(pid, &status, 0);
    failed += !(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  std::filesystem::remove_all(dir);
  return failed == 0 ? 0 : 1;
}
