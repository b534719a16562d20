// One communicator's UCP worker: its address in the store, endpoints to the peers it exchanges
// with (made on first use, from the address each peer published), tag messages, and waits that
// sleep on the worker's event file descriptor instead of spinning.
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Worker> worker, Worker::Create(context, store,
//   prefix, rank)); SHARDKIT_ASSIGN_OR_RETURN(ucp_ep_h ep, worker->Endpoint(peer, deadline));
//   SHARDKIT_RETURN_IF_ERROR(worker->Wait(done, deadline, tick));
//
// Peer failure: an endpoint to a peer of this host (same boot and PID namespace) is made without
// UCX's error handling, which in UCX 1.13 would take CMA (single-copy) away from it and leave a
// two-copy shared-memory pipeline, 2.5x slower measured here; such a peer's death is seen through
// /proc instead (GonePeer). Endpoints to other hosts, or on one host when UCX_TLS allows no shared
// memory, report peer failure (UCP_ERR_HANDLING_MODE_PEER): a peer whose connection breaks, or
// whose process the keepalive finds gone, becomes failed_peer(). Not thread-safe: one thread per
// communicator.
#ifndef SHARDKIT_BACKENDS_UCX_INTERNAL_WORKER_H_
#define SHARDKIT_BACKENDS_UCX_INTERNAL_WORKER_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "backends/ucx/internal/ucx_context.h"
#include "core/store/store.h"

namespace shardkit::ucx_backend {

class Worker {
 public:
  // A peer whose endpoint failed, and UCX's status for it.
  struct PeerFailure {
    int peer;
    ucs_status_t status;
  };

  // Creates the worker and publishes its address under "<prefix>/ucx/<rank>" and its process
  // (peer_process.h) under "<prefix>/ucx/<rank>/process".
  static absl::StatusOr<std::unique_ptr<Worker>> Create(UcxContext context,
                                                        std::shared_ptr<Store> store,
                                                        std::string prefix, int rank);
  ~Worker();
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  const UcpLibrary& ucp() const { return *context_.ucp; }
  const UcxContext& context() const { return context_; }
  ucp_worker_h handle() const { return worker_; }

  // The endpoint to `peer`, made on first use from the address it published (waited for until
  // `deadline`). Errors: the store's (kDeadlineExceeded naming the key), kUnavailable with UCX's.
  absl::StatusOr<ucp_ep_h> Endpoint(int peer, absl::Time deadline);

  // Makes sure a peer this rank receives from is watched for failure (GonePeer on this host, an
  // endpoint's error handling for other hosts), without needing an endpoint to it.
  // Errors: as Endpoint's address lookup.
  absl::Status Watch(int peer, absl::Time deadline);

  // The first peer whose endpoint reported an error.
  std::optional<PeerFailure> failed_peer() const { return failed_; }

  // The first of `peers` (sent to or watched) whose process is seen to have ended: on this host, by
  // /proc (peer_process.h). Endpoints to other hosts are left to UCX's keepalive.
  std::optional<int> GonePeer(const std::vector<int>& peers) const;

  // Progresses the worker until done() is true (OK), `deadline` passes (kDeadlineExceeded), or
  // tick() fails (its error); between events it sleeps on the worker's file descriptor, waking at
  // least every 100 ms to run the keepalive and tick().
  absl::Status Wait(absl::FunctionRef<bool()> done, absl::Time deadline,
                    absl::FunctionRef<absl::Status()> tick);

  // Closes every endpoint (`force`: after a failure, dropping what is queued; else flushing what
  // is, as the destructor does), waiting up to 1 s, and destroys the worker: no transfer of it
  // touches memory after this returns. Requests not yet freed must not be touched either.
  // Idempotent.
  void Shutdown(bool force);

  // ucp_ep_print_info of the endpoint to `peer` (its lanes and transports), "" if there is none.
  std::string EndpointInfo(int peer) const;

 private:
  struct Slot {
    Worker* worker;
    int peer;
    std::string address;       // the peer worker's
    ucp_ep_h ep = nullptr;     // made on the first send
    std::string process;       // the peer's ThisProcess()
    bool peer_errors = false;  // made with UCP_ERR_HANDLING_MODE_PEER
  };
  Worker(UcxContext context, ucp_worker_h worker, int efd, std::shared_ptr<Store> store,
         std::string prefix)
      : context_(context),
        worker_(worker),
        efd_(efd),
        store_(std::move(store)),
        prefix_(std::move(prefix)) {}
  // The peer's slot, its address and process read from the store on first use.
  absl::StatusOr<Slot*> Peer(int peer, absl::Time deadline);
  static void OnEndpointError(void* arg, ucp_ep_h ep, ucs_status_t status);

  const UcxContext context_;
  ucp_worker_h worker_;
  const int efd_;
  const std::shared_ptr<Store> store_;
  const std::string prefix_;
  std::map<int, std::unique_ptr<Slot>> endpoints_;
  std::optional<PeerFailure> failed_;
};

// The store key of `rank`'s worker address.
std::string AddressKey(const std::string& prefix, int rank);

}  // namespace shardkit::ucx_backend

#endif  // SHARDKIT_BACKENDS_UCX_INTERNAL_WORKER_H_
