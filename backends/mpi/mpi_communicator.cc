#include "backends/mpi/mpi_communicator.h"

#include <mpi.h>

#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "backends/mpi/internal/job.h"
#include "backends/mpi/internal/requests.h"
#include "core/base/check.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"

namespace shardkit::mpi_backend {
namespace {

// What a communicator (the world's, or a subgroup's) knows about its MPI job.
struct Job {
  int world_rank = 0;  // in MPI_COMM_WORLD, for messages
  int tag_ub = 32767;  // MPI_TAG_UB: the largest tag (the standard's minimum by default)
};

absl::Status MpiStatus(int code, const std::string& what) {
  if (code == MPI_SUCCESS) return absl::OkStatus();
  return absl::InternalError(absl::StrCat(what, ": ", MpiErrorText(code)));
}

class MpiCommunicator final : public Communicator {
 public:
  MpiCommunicator(CommunicatorOptions options, MPI_Comm comm, Job job)
      : Communicator(std::move(options)), comm_(comm), job_(job) {}
  ~MpiCommunicator() override {
    if (MpiActive()) MPI_Comm_free(&comm_);
  }

 protected:
  absl::Status Exchange(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs, absl::Time deadline) override;
  absl::StatusOr<std::unique_ptr<Communicator>> CreateSubgroup(const std::vector<int>& members,
                                                               int new_rank, uint64_t split_id,
                                                               absl::Time deadline) override;
  bool SupportsDevice(const Device& device) const override { return device.is_cpu(); }

 private:
  // "Exchange (backend=mpi, rank=1/3, world rank 1, seq=7, MPI tag 30)": `what`, then `detail`.
  std::string Context(const std::string& what, const std::string& detail) const;

  MPI_Comm comm_;
  const Job job_;
};

std::string MpiCommunicator::Context(const std::string& what, const std::string& detail) const {
  return absl::StrCat(what, " (backend=mpi, rank=", rank(), "/", world_size(), ", world rank ",
                      job_.world_rank, ", ", detail, ")");
}

absl::Status MpiCommunicator::Exchange(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                                       std::span<const RecvOp> recvs, absl::Time deadline) {
  if (sends.empty() && recvs.empty()) return absl::OkStatus();
  // The core's tags are (seq << 2 | phase) for payloads and fixed for the agreement; modulo
  // 2^31 (Open MPI's MPI_TAG_UB + 1) they stay distinct for 2^29 calls, and messages of one pair
  // are matched in order anyway.
  const int mpi_tag = static_cast<int>(tag % (static_cast<uint64_t>(job_.tag_ub) + 1));
  RequestSet requests(comm_, mpi_tag);
  absl::Status status;
  for (const RecvOp& r : recvs) {
    if (status.ok()) status = requests.PostRecv(r.peer, r.data, r.size);
  }
  for (const SendOp& s : sends) {
    if (status.ok()) status = requests.PostSend(s.peer, s.data, s.size);
  }
  if (status.ok()) status = requests.WaitAll(deadline);
  if (status.ok()) return status;
  status = Annotate(status, Context("Exchange", absl::StrCat("seq=", seq, ", MPI tag ", mpi_tag)));
  // Pending messages cannot be taken back: MPI may still write into buffers the caller frees.
  if (requests.pending() > 0) AbortJob(status, kAbortExitCode);
  return status;
}

absl::StatusOr<std::unique_ptr<Communicator>> MpiCommunicator::CreateSubgroup(
    const std::vector<int>& members, int new_rank, uint64_t split_id, absl::Time deadline) {
  MPI_Comm sub = MPI_COMM_NULL;
  {
    Watchdog watchdog(deadline, Context("MPI_Comm_split", absl::StrCat("split ", split_id)),
                      kAbortExitCode);
    SHARDKIT_RETURN_IF_ERROR(
        MpiStatus(MPI_Comm_split(comm_, new_rank >= 0 ? 0 : MPI_UNDEFINED, new_rank, &sub),
                  "MPI_Comm_split"));
  }
  if (new_rank < 0) return std::unique_ptr<Communicator>();  // MPI_COMM_NULL: not a member
  int sub_rank = -1;
  MPI_Comm_rank(sub, &sub_rank);
  SHARDKIT_CHECK(sub_rank == new_rank) << "MPI_Comm_split gave rank " << sub_rank;
  CommunicatorOptions options{new_rank, static_cast<int>(members.size()), backend(),
                              default_timeout()};
  return std::unique_ptr<Communicator>(new MpiCommunicator(std::move(options), sub, job_));
}

// Every rank's options against MPI's numbering: the same verdict on every rank. Options left at
// rank 0 of 1 (no launcher variables) take MPI's values.
absl::Status CheckOptions(MPI_Comm comm, const ConnectOptions& options, int rank, int size) {
  const bool defaults = options.rank == 0 && options.world_size == 1;
  int mine[2] = {defaults ? rank : options.rank, defaults ? size : options.world_size};
  std::vector<int> all(2 * static_cast<size_t>(size));
  SHARDKIT_RETURN_IF_ERROR(
      MpiStatus(MPI_Allgather(mine, 2, MPI_INT, all.data(), 2, MPI_INT, comm), "MPI_Allgather"));
  std::vector<int> wrong;
  std::string example;
  for (int r = 0; r < size; ++r) {
    if (all[2 * r] == r && all[2 * r + 1] == size) continue;
    if (wrong.empty()) {
      example =
          absl::StrCat(" (rank ", r, " was given rank ", all[2 * r], " of ", all[2 * r + 1], ")");
    }
    wrong.push_back(r);
  }
  if (wrong.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      "the MPI job has ", size, size == 1 ? " rank" : " ranks", ", and the rank options of ",
      FormatRanks(wrong), " disagree with MPI_COMM_WORLD", example,
      ": start every rank with mpirun, and leave SHARDKIT_RANK and SHARDKIT_WORLD_SIZE unset or "
      "set them to MPI's"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(const ConnectOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  SHARDKIT_RETURN_IF_ERROR(EnsureMpiInitialized());
  Job job;
  int size = 1, flag = 0;
  int* tag_ub = nullptr;
  MPI_Comm_rank(MPI_COMM_WORLD, &job.world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &flag);
  if (flag && tag_ub != nullptr) job.tag_ub = *tag_ub;
  MPI_Comm comm = MPI_COMM_NULL;
  {
    Watchdog watchdog(deadline,
                      absl::StrCat("creating the MPI communicator (world rank ", job.world_rank,
                                   " of ", size, ")"),
                      kAbortExitCode);
    SHARDKIT_RETURN_IF_ERROR(MpiStatus(MPI_Comm_dup(MPI_COMM_WORLD, &comm), "MPI_Comm_dup"));
    // Errors come back as codes (translated into Status), not as MPI's default abort.
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    if (absl::Status status = CheckOptions(comm, options, job.world_rank, size); !status.ok()) {
      MPI_Comm_free(&comm);
      return status;
    }
  }
  CommunicatorOptions comm_options{job.world_rank, size, "mpi", options.timeout};
  return std::unique_ptr<Communicator>(new MpiCommunicator(std::move(comm_options), comm, job));
}

}  // namespace shardkit::mpi_backend
