// One rank of the abort test (mpi_abort_test.py), under mpirun:
//   mpi_abort_ranks SECONDS barrier   every rank connects to the "mpi" backend; rank 0 enters a
//                                     Barrier with a deadline of SECONDS, the middle ranks one of
//                                     60 s, and the last rank never enters it (it sleeps 60 s).
//   mpi_abort_ranks SECONDS connect   the last rank initialises MPI and sleeps 60 s without
//                                     connecting; the others connect with a SECONDS deadline.
// Either way a deadline passes with the last rank missing, so the backend aborts the job.
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "absl/time/time.h"
#include "core/comm/communicator.h"
#include "core/comm/connect.h"

namespace {

int Barrier(double seconds) {
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
  const absl::Duration timeout = rank == 0 ? absl::Seconds(seconds) : absl::Seconds(60);
  const absl::Status status = (*comm)->Barrier({.timeout = timeout});
  // Not reached on rank 0: the backend aborts the job when the deadline passes.
  std::fprintf(stderr, "rank %d: Barrier returned %s\n", rank, status.ToString().c_str());
  return status.ok() ? 0 : 1;
}

int ConnectLate(double seconds) {
  // MPI's own start-up waits for every rank, so the late rank starts MPI and then stays away.
  int provided = 0, rank = 0, size = 0;
  MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (rank == size - 1) {
    sleep(60);
    return 0;
  }
  shardkit::ConnectOptions options;
  options.backend = "mpi";
  options.timeout = absl::Seconds(seconds);
  absl::StatusOr<std::unique_ptr<shardkit::Communicator>> comm = shardkit::Connect(options);
  // Not reached: the backend's watchdog aborts the job when the deadline passes.
  std::fprintf(stderr, "rank %d: Connect returned %s\n", rank, comm.status().ToString().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::strcmp(argv[2], "barrier") == 0) return Barrier(std::atof(argv[1]));
  if (argc == 3 && std::strcmp(argv[2], "connect") == 0) return ConnectLate(std::atof(argv[1]));
  std::fprintf(stderr, "usage: mpi_abort_ranks SECONDS barrier|connect\n");
  return 2;
}
