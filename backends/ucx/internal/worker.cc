#include "backends/ucx/internal/worker.h"

#include <poll.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/ucx/internal/peer_process.h"
#include "core/base/deadline.h"
#include "core/base/status_macros.h"

namespace shardkit::ucx_backend {
namespace {

// The longest a wait sleeps between progress calls: the keepalive (peer failure on shared
// memory) and the caller's tick run at least this often.
constexpr absl::Duration kTick = absl::Milliseconds(100);
// How long Shutdown progresses the endpoints' closes.
constexpr absl::Duration kCloseGrace = absl::Seconds(1);

absl::Status UcxError(const UcpLibrary& ucp, const std::string& what, ucs_status_t status) {
  return absl::InternalError(absl::StrCat(what, ": ", ucp.Text(status)));
}

}  // namespace

std::string AddressKey(const std::string& prefix, int rank) {
  return absl::StrCat(prefix, "/ucx/", rank);
}

absl::StatusOr<std::unique_ptr<Worker>> Worker::Create(UcxContext context,
                                                       std::shared_ptr<Store> store,
                                                       std::string prefix, int rank) {
  const UcpLibrary& ucp = *context.ucp;
  ucp_worker_params_t params{};
  params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
  params.thread_mode = UCS_THREAD_MODE_SERIALIZED;  // the communicator's calls are serialized
  ucp_worker_h handle = nullptr;
  ucs_status_t status = ucp.worker_create(context.context, &params, &handle);
  if (status != UCS_OK) return UcxError(ucp, "creating a UCP worker", status);
  int efd = -1;
  status = ucp.worker_get_efd(handle, &efd);
  std::unique_ptr<Worker> worker(new Worker(context, handle, efd, std::move(store), prefix));
  if (status != UCS_OK) return UcxError(ucp, "the UCP worker's event descriptor", status);
  ucp_address_t* address = nullptr;
  size_t size = 0;
  status = ucp.worker_get_address(handle, &address, &size);
  if (status != UCS_OK) return UcxError(ucp, "the UCP worker's address", status);
  const std::string bytes(reinterpret_cast<const char*>(address), size);
  ucp.worker_release_address(handle, address);
  SHARDKIT_RETURN_IF_ERROR(
      worker->store_->Set(AddressKey(worker->prefix_, rank) + "/process", ThisProcess()));
  SHARDKIT_RETURN_IF_ERROR(worker->store_->Set(AddressKey(worker->prefix_, rank), bytes));
  return worker;
}

Worker::~Worker() { Shutdown(/*force=*/false); }

void Worker::OnEndpointError(void* arg, ucp_ep_h /*ep*/, ucs_status_t status) {
  auto* slot = static_cast<Slot*>(arg);
  if (!slot->worker->failed_.has_value()) slot->worker->failed_ = PeerFailure{slot->peer, status};
}

absl::StatusOr<Worker::Slot*> Worker::Peer(int peer, absl::Time deadline) {
  if (worker_ == nullptr) return absl::FailedPreconditionError("the UCP worker was shut down");
  auto it = endpoints_.find(peer);
  if (it != endpoints_.end()) return it->second.get();
  absl::StatusOr<std::string> address = store_->Get(
      AddressKey(prefix_, peer), std::max(absl::ZeroDuration(), deadline - absl::Now()));
  if (!address.ok()) {
    return Annotate(address.status(), absl::StrCat("the UCX address of peer ", peer));
  }
  auto slot = std::make_unique<Slot>(Slot{this, peer});
  slot->address = *std::move(address);
  // Set before the address: there once the address is.
  slot->process =
      store_->Get(AddressKey(prefix_, peer) + "/process", absl::Seconds(1)).value_or("");
  slot->peer_errors = !OnThisHost(slot->process) || !SharedMemoryAllowed(std::getenv("UCX_TLS"));
  return endpoints_.emplace(peer, std::move(slot)).first->second.get();
}

absl::StatusOr<ucp_ep_h> Worker::Endpoint(int peer, absl::Time deadline) {
  SHARDKIT_ASSIGN_OR_RETURN(Slot * slot, Peer(peer, deadline));
  if (slot->ep != nullptr) return slot->ep;
  ucp_ep_params_t params{};
  params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS | UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                      UCP_EP_PARAM_FIELD_ERR_HANDLER;
  params.address = reinterpret_cast<const ucp_address_t*>(slot->address.data());
  params.err_mode = slot->peer_errors ? UCP_ERR_HANDLING_MODE_PEER : UCP_ERR_HANDLING_MODE_NONE;
  params.err_handler.cb = &Worker::OnEndpointError;
  params.err_handler.arg = slot;
  const ucs_status_t status = ucp().ep_create(worker_, &params, &slot->ep);
  if (status != UCS_OK) {
    slot->ep = nullptr;
    return absl::UnavailableError(
        absl::StrCat("connecting to peer ", peer, " over UCX: ", ucp().Text(status)));
  }
  return slot->ep;
}

absl::Status Worker::Watch(int peer, absl::Time deadline) {
  SHARDKIT_ASSIGN_OR_RETURN(Slot * slot, Peer(peer, deadline));
  // A peer of another host is watched by UCX's error handling on an endpoint to it. The peer may
  // already have sent everything and closed its worker: then there is nothing left to watch.
  if (slot->peer_errors && slot->ep == nullptr) (void)Endpoint(peer, deadline);
  return absl::OkStatus();
}

std::optional<int> Worker::GonePeer(const std::vector<int>& peers) const {
  for (int peer : peers) {
    auto it = endpoints_.find(peer);
    if (it != endpoints_.end() && ProcessGone(it->second->process)) return peer;
  }
  return std::nullopt;
}

absl::Status Worker::Wait(absl::FunctionRef<bool()> done, absl::Time deadline,
                          absl::FunctionRef<absl::Status()> tick) {
  absl::Time next_tick = absl::Now() + kTick;
  for (;;) {
    while (ucp().worker_progress(worker_) != 0) {
    }
    if (done()) return absl::OkStatus();
    const absl::Time now = absl::Now();
    if (now >= deadline) return absl::DeadlineExceededError("timed out");
    if (now >= next_tick) {
      SHARDKIT_RETURN_IF_ERROR(tick());
      next_tick = now + kTick;
    }
    const ucs_status_t armed = ucp().worker_arm(worker_);
    if (armed == UCS_ERR_BUSY) continue;  // events arrived meanwhile: progress them
    if (armed != UCS_OK) return UcxError(ucp(), "ucp_worker_arm", armed);
    pollfd fd{efd_, POLLIN, 0};
    (void)::poll(&fd, 1, PollTimeoutMs(std::min(deadline, next_tick)));
  }
}

void Worker::Shutdown(bool force) {
  if (worker_ == nullptr) return;
  std::vector<void*> closing;
  for (auto& [peer, slot] : endpoints_) {
    if (slot->ep == nullptr) continue;
    // Flushed when the communicator goes (eager sends may still sit in UCX's queues); after a
    // failure forced where the endpoint handles peer failure (UCX allows it only there).
    ucp_request_param_t params{};
    params.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    params.flags = force && slot->peer_errors ? UCP_EP_CLOSE_FLAG_FORCE : 0;
    void* request = ucp().ep_close_nbx(slot->ep, &params);
    if (request != nullptr && !UCS_PTR_IS_ERR(request)) closing.push_back(request);
  }
  const absl::Time until = absl::Now() + kCloseGrace;
  auto closed = [&] {
    for (void*& request : closing) {
      if (request != nullptr && ucp().request_check_status(request) != UCS_INPROGRESS) {
        ucp().request_free(request);
        request = nullptr;
      }
    }
    return std::all_of(closing.begin(), closing.end(), [](void* r) { return r == nullptr; });
  };
  while (!closed() && absl::Now() < until) ucp().worker_progress(worker_);
  // A close still pending (a peer that stalled) goes back to UCX first: UCX aborts the process
  // when it destroys a worker holding a request its caller has not released. Destroying the
  // worker then ends what is still pending: nothing of it runs afterwards.
  for (void* request : closing) {
    if (request != nullptr) ucp().request_free(request);
  }
  ucp().worker_destroy(worker_);
  worker_ = nullptr;
}

std::string Worker::EndpointInfo(int peer) const {
  auto it = endpoints_.find(peer);
  if (it == endpoints_.end() || it->second->ep == nullptr || worker_ == nullptr) return "";
  auto print = [&](FILE* out) { ucp().ep_print_info(it->second->ep, out); };
  return PrintedText(print);
}

}  // namespace shardkit::ucx_backend
