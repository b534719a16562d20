// The process's MPI job: initialisation once per process, the job-wide abort, and a watchdog that
// bounds MPI's blocking calls by a deadline. Internal to //backends/mpi.
#ifndef SHARDKIT_BACKENDS_MPI_INTERNAL_JOB_H_
#define SHARDKIT_BACKENDS_MPI_INTERNAL_JOB_H_

#include <condition_variable>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace shardkit::mpi_backend {

// Initialises MPI with MPI_THREAD_MULTIPLE the first time (and finalises it at exit), or checks
// the thread level of an MPI that the program initialised itself. The same result every call.
// Errors: kFailedPrecondition (MPI already finalised, or initialised without
// MPI_THREAD_MULTIPLE); kInternal if MPI_Init_thread fails.
[[nodiscard]] absl::Status EnsureMpiInitialized();

// Whether MPI is initialised and not yet finalised (MPI objects may still be freed).
bool MpiActive();

// Writes "shardkit: <status>; aborting the MPI job (MPI_Abort, exit code <code>)" to stderr and
// calls MPI_Abort(MPI_COMM_WORLD, code); never returns.
[[noreturn]] void AbortJob(const absl::Status& status, int code);

// While alive, aborts the job (AbortJob(DeadlineExceeded(what), code)) if the deadline passes:
// for MPI calls that block without a deadline of their own (MPI_Comm_dup, MPI_Comm_split, a
// blocking allgather). Destruction before the deadline disarms it.
class Watchdog {
 public:
  Watchdog(absl::Time deadline, std::string what, int code);
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;
  ~Watchdog();

 private:
  void Watch(absl::Time deadline, int code);

  const std::string what_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;  // guarded by mu_
  std::thread thread_;
};

}  // namespace shardkit::mpi_backend

#endif  // SHARDKIT_BACKENDS_MPI_INTERNAL_JOB_H_
