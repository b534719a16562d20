// One rank of the abort test (mpi_abort_test.py), under mpirun: connects to the "mpi" backend,
// then rank 0 enters a Barrier with a deadline of argv[1] seconds, the middle ranks one with a
// deadline of 60 s, and the last rank never enters it (it sleeps for 60 s). Rank 0's deadline
// passes with its message from the last rank pending, so the backend aborts the job.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <memory>

#include "absl/time/time.h"
#include "core/comm/communicator.h"
#include "core/comm/connect.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: mpi_abort_ranks SECONDS\n");
    return 2;
  }
  shardkit::ConnectOptions options;
  options.backend = "mpi";
  absl::StatusOr<std::unique_ptr<shardkit::Communicator>> comm = shardkit::Connect(options);
  if (!comm.ok()) {
    std::fprintf(stderr, "Connect: %s\n", comm.status().ToString().c_str());
    return 1;
  }
  const int rank = (*comm)->rank();
  if (rank == (*comm)->world_size() - 1) {
    sleep(60);
    return 0;
  }
  const absl::Duration timeout = rank == 0 ? absl::Seconds(std::atof(argv[1])) : absl::Seconds(60);
  const absl::Status status = (*comm)->Barrier({.timeout = timeout});
  // Not reached on rank 0: the backend aborts the job when the deadline passes.
  std::fprintf(stderr, "rank %d: Barrier returned %s\n", rank, status.ToString().c_str());
  return status.ok() ? 0 : 1;
}
