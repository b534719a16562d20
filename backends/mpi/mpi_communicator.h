// The MPI backend: a Communicator over MPI point-to-point messages (Debian's Open MPI 4.1), for
// CPU memory. Ranks are those of the MPI job (`mpirun -np N prog`): rank and world size come
// from MPI_COMM_WORLD, and no store is needed.
//
//   // Under mpirun; every rank calls it, in the same order as its other MPI-collective calls.
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm,
//                             mpi_backend::CreateMpiCommunicator(ConnectOptions()));
//
// Hooks: Exchange (and so ExchangeControl, the default) posts one MPI_Irecv/MPI_Isend per peer
// buffer (cut into messages of at most 1 GiB) on the communicator's own duplicate of
// MPI_COMM_WORLD, with the MPI tag derived from the call's tag (its sequence number and phase),
// and polls them with MPI_Testsome until the deadline; CreateSubgroup is MPI_Comm_split.
// The collectives themselves stay in core/comm.
//
// Deadlines: a deadline that passes while messages are pending cannot be undone (MPI has no
// safe cancel of a send, and may still write into the receive buffers after we return), so the
// backend writes the timeout, naming the peers, to stderr as a kDeadlineExceeded status message
// and calls MPI_Abort(MPI_COMM_WORLD, 1): the whole job ends. Open MPI 4.1 then ends this rank
// with exit code 1, kills the other ranks with SIGTERM, and mpirun exits 1 (measured; see
// docs/communication.md). The blocking MPI calls (MPI_Comm_dup at creation, MPI_Comm_split) are
// bounded the same way by a watchdog thread.
// Thread-safety: MPI is initialised with MPI_THREAD_MULTIPLE (once per process, finalised at
// exit when this backend initialised it); one thread per communicator, as for every backend.
#ifndef SHARDKIT_BACKENDS_MPI_MPI_COMMUNICATOR_H_
#define SHARDKIT_BACKENDS_MPI_MPI_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/comm/connect_options.h"

namespace shardkit::mpi_backend {

// The exit code MPI_Abort is given when a deadline passes with messages pending (what the CLI
// exits with for a passed deadline).
inline constexpr int kAbortExitCode = 1;

// The "mpi" factory. Collective over MPI_COMM_WORLD. options.rank/world_size are checked against
// MPI's when they are not the defaults (rank 0 of 1, what ConnectOptionsFromEnv gives without
// SHARDKIT_RANK/SHARDKIT_WORLD_SIZE); options.timeout bounds the creation and is the default
// per-call deadline; the store and addresses are not used.
// Errors: kInvalidArgument (on every rank) when some rank's options disagree with MPI;
// kFailedPrecondition if MPI was initialised elsewhere without MPI_THREAD_MULTIPLE or already
// finalised; kInternal with MPI's error text.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> CreateMpiCommunicator(
    const ConnectOptions& options);

}  // namespace shardkit::mpi_backend

#endif  // SHARDKIT_BACKENDS_MPI_MPI_COMMUNICATOR_H_
