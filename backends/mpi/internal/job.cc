#include "backends/mpi/internal/job.h"

#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/mpi/internal/requests.h"

namespace shardkit::mpi_backend {
namespace {

void FinalizeAtExit() {
  if (MpiActive()) MPI_Finalize();
}

absl::Status InitializeOnce() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (finalized) return absl::FailedPreconditionError("MPI has already been finalised");
  int provided = MPI_THREAD_SINGLE;
  if (initialized) {
    MPI_Query_thread(&provided);
  } else {
    const int code = MPI_Init_thread(nullptr, nullptr, MPI_THREAD_MULTIPLE, &provided);
    if (code != MPI_SUCCESS) {
      return absl::InternalError(absl::StrCat("MPI_Init_thread: ", MpiErrorText(code)));
    }
    std::atexit(&FinalizeAtExit);
  }
  if (provided < MPI_THREAD_MULTIPLE) {
    return absl::FailedPreconditionError(absl::StrCat(
        "MPI provides thread level ", provided, ", the MPI backend needs MPI_THREAD_MULTIPLE (",
        MPI_THREAD_MULTIPLE, "): its deadline watchdog calls MPI_Abort from its own thread"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EnsureMpiInitialized() {
  static const absl::Status* status = new absl::Status(InitializeOnce());
  return *status;
}

bool MpiActive() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

void AbortJob(const absl::Status& status, int code) {
  const std::string line =
      absl::StrCat("shardkit: ", status.ToString(), "; aborting the MPI job (MPI_Abort, exit code ",
                   code, ")\n");
  std::fflush(stdout);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, code);
  _exit(code);  // MPI_Abort does not return; if it ever did, the buffers must still not be used
}

Watchdog::Watchdog(absl::Time deadline, std::string what, int code)
    : what_(std::move(what)), thread_([this, deadline, code] { Watch(deadline, code); }) {}

Watchdog::~Watchdog() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void Watchdog::Watch(absl::Time deadline, int code) {
  const absl::Time start = absl::Now();
  std::unique_lock<std::mutex> lock(mu_);
  // An infinite deadline waits a year: as good as forever, and no clock overflow.
  const absl::Duration wait =
      std::clamp(deadline - start, absl::ZeroDuration(), absl::Hours(24 * 365));
  const auto until = std::chrono::steady_clock::now() + absl::ToChronoMilliseconds(wait);
  if (cv_.wait_until(lock, until, [this] { return done_; })) return;
  AbortJob(absl::DeadlineExceededError(
               absl::StrCat(what_, ": not done after ", absl::FormatDuration(absl::Now() - start),
                            " (a rank that never called it, or a hung peer)")),
           code);
}

}  // namespace shardkit::mpi_backend
