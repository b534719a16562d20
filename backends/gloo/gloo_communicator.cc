#include "backends/gloo/gloo_communicator.h"

#include <signal.h>
#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <exception>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "backends/gloo/gloo_status.h"
#include "backends/gloo/lazy_context.h"
#include "backends/gloo/mesh_payload.h"
#include "backends/gloo/peer_watch.h"
#include "backends/socket_mesh/socket_mesh.h"
#include "core/base/deadline.h"
#include "core/base/env.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"
#include "core/comm/backend_registry.h"
#include "core/comm/culprit.h"
#include "core/comm/stall_search.h"
#include "core/store/rendezvous.h"
#include "gloo/transport/tcp/device.h"
#include "gloo/transport/unbound_buffer.h"

namespace shardkit::gloo_backend {
namespace {

// Whether a buffer's operation had completed before an exchange failed. After a failure Gloo has
// signalled every pair, so this returns at once: true if the completion was already recorded.
bool Completed(::gloo::transport::UnboundBuffer& buffer, bool recv) noexcept {
  try {
    return recv ? buffer.waitRecv(std::chrono::milliseconds(1))
                : buffer.waitSend(std::chrono::milliseconds(1));
  } catch (...) {
    return false;
  }
}

// What a failed exchange had completed, for its error: the peers whose data never fully arrived
// ("not heard from"), those whose sends were not confirmed, and the bytes each way. `in`/`out`
// are the posted buffers in the order of `recvs`/`sends`; the first `recvs_done`/`sends_done`
// were waited for successfully. The others are probed only when `probe` (after a Gloo failure,
// which signals every pair, so probing returns at once; not after the peer watch aborted the
// waits, when a probe would wait and its timeout would signal the whole context).
template <typename SendOp, typename RecvOp>
TransferProgress Progress(std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                          const std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>>& in,
                          const std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>>& out,
                          size_t recvs_done, size_t sends_done, bool probe) {
  TransferProgress progress;
  for (size_t i = 0; i < recvs.size(); ++i) {
    const bool done =
        i < recvs_done || (probe && i < in.size() && Completed(*in[i], /*recv=*/true));
    progress.AddRecv(recvs[i].peer, recvs[i].size, done ? recvs[i].size : 0);
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    const bool done =
        i < sends_done || (probe && i < out.size() && Completed(*out[i], /*recv=*/false));
    progress.AddSend(sends[i].peer, sends[i].size, done ? sends[i].size : 0);
  }
  return progress;
}

// What a departure that fails an exchange says of why (SocketMesh::Close's cause).
int CauseOf(const SocketMesh::Departure& d) {
  using How = SocketMesh::Departure::How;
  if (d.how == How::kVanished) return d.peer;
  if (d.how == How::kConnectionClosed) return d.peer | SocketMesh::kClosedCause;
  return d.how == How::kGaveUp ? d.cause : -1;
}

// The distinct peers of one exchange.
template <typename SendOp, typename RecvOp>
std::vector<int> Peers(std::span<const SendOp> sends, std::span<const RecvOp> recvs) {
  std::vector<int> peers;
  for (const SendOp& s : sends) peers.push_back(s.peer);
  for (const RecvOp& r : recvs) peers.push_back(r.peer);
  std::sort(peers.begin(), peers.end());
  peers.erase(std::unique(peers.begin(), peers.end()), peers.end());
  return peers;
}

// How long a failed exchange waits for the mesh to see a departure (see DescribeDepartures).
constexpr absl::Duration kDepartureGrace = absl::Milliseconds(200);
// How long buffers may take to complete once the watch has seen the peer's pair connection end
// with everything read (see FinishAfterClose).
constexpr absl::Duration kCloseGrace = absl::Milliseconds(250);

// A rank that exchanges payload with every other holds a Gloo pair per peer (and its tree's
// control connections): past ~1000 ranks that is more than the usual soft limit of 1024
// descriptors, so it is raised to the hard limit, once.
void RaiseDescriptorLimit() {
  static std::once_flag once;
  std::call_once(once, [] {
    rlimit limit;
    if (::getrlimit(RLIMIT_NOFILE, &limit) == 0 && limit.rlim_cur < limit.rlim_max) {
      limit.rlim_cur = limit.rlim_max;
      (void)::setrlimit(RLIMIT_NOFILE, &limit);
    }
  });
}

void IgnoreSigpipe() {
  static std::once_flag once;
  std::call_once(once, [] { signal(SIGPIPE, SIG_IGN); });
}

struct Endpoint {
  std::shared_ptr<Store> store;
  std::string key_prefix;
  std::shared_ptr<::gloo::transport::Device> device;
  sockaddr_storage address{};  // the device's address: the control mesh listens there too
};

class GlooCommunicator final : public Communicator {
 public:
  GlooCommunicator(CommunicatorOptions options, Endpoint endpoint,
                   std::shared_ptr<LazyContext> context, std::unique_ptr<SocketMesh> mesh,
                   std::unique_ptr<SocketMesh> payload_mesh)
      : Communicator(std::move(options), /*gathers_sends=*/true),
        endpoint_(std::move(endpoint)),
        context_(std::move(context)),
        mesh_(std::move(mesh)),
        payload_mesh_(std::move(payload_mesh)),
        watch_(mesh_ != nullptr ? std::make_unique<PeerWatch>(*mesh_) : nullptr) {}

  // Rendezvous of `rank` of `size` through endpoint.store under endpoint.key_prefix.
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(CommunicatorOptions options,
                                                              Endpoint endpoint,
                                                              absl::Time deadline);

 protected:
  absl::Status Exchange(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs, absl::Time deadline) override {
    return Transfer(tag, seq, sends, recvs, deadline);
  }
  // Segment rounds (AllToAllSegments, PreparedTransfer): over the payload mesh, gathering
  // (mesh_payload.h).
  absl::Status ExchangeSegments(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                                std::span<const RecvOp> recvs, absl::Time deadline,
                                absl::FunctionRef<absl::Status(size_t)> arrived) override;
  absl::Status ExchangeControl(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                               std::span<const RecvOp> recvs, absl::Time deadline) override;
  absl::StatusOr<std::unique_ptr<Communicator>> CreateSubgroup(const std::vector<int>& members,
                                                               int new_rank, uint64_t split_id,
                                                               absl::Time deadline) override;
  bool SupportsDevice(const Device& device) const override { return device.is_cpu(); }
  bool Interruptible() const override { return true; }
  void Interrupt(bool idle) noexcept override;

 private:
  // Exchange over Gloo's pairs (the segment calls' payload goes over the payload mesh instead).
  absl::Status Transfer(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs, absl::Time deadline);
  // Makes the pairs still missing for an exchange with `peers` (see lazy_context.h), watched like
  // the exchange's waits.
  absl::Status ConnectPairs(const std::vector<int>& peers, uint64_t seq, absl::Time deadline);
  using Buffers = std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>>;
  // (peer, socket) of the pairs of `peers` that have no control connection, for the watch.
  std::vector<std::pair<int, int>> PairSockets(const std::vector<int>& peers) const;
  // After the watch saw a pair's connection close: whether the buffers not yet waited for
  // complete within kCloseGrace (the peer sent its part, then left).
  bool FinishAfterClose(Buffers& in, Buffers& out, size_t recvs_done, size_t sends_done,
                        absl::Time deadline) noexcept;
  // Who has left, as the mesh sees it, after an exchange with `peers` failed with `status`. A
  // Gloo I/O error can come from a dead peer's pair (a connection reset) a moment before the mesh
  // sees that peer's connection end: then this waits up to kDepartureGrace for it.
  std::string DescribeDepartures(const std::vector<int>& peers, const absl::Status& status) const;
  // `cause`: the rank (MeshMarker's encoding) whose departure made this rank give up, or -1;
  // `between_calls`: as SocketMesh::Close's (an Abort with no call in flight).
  void CloseConnections(int cause = -1, bool between_calls = false) noexcept;
  // After a failed exchange (`waited_on`: the peers it still waited on; `budget`: the time it had
  // at its start): closes the connections with the cause (`cause`, else the mesh's, else a
  // stalled rank that the stall search finds when the deadline passed) and attaches the culprit
  // it names to `status`.
  absl::Status Fail(absl::Status status, int cause, const std::vector<int>& waited_on,
                    absl::Duration budget);

  const Endpoint endpoint_;
  const std::shared_ptr<LazyContext> context_;  // null for a world of one
  const std::unique_ptr<SocketMesh> mesh_;      // null for a world of one
  // AllToAllSegments' payload (mesh_payload.h): connections of their own, so that the control
  // mesh's stay at message boundaries, where a rank that gives up can leave its marker and cause.
  const std::unique_ptr<SocketMesh> payload_mesh_;  // null for a world of one
  const std::unique_ptr<PeerWatch> watch_;  // of mesh_ (destroyed first); null for a world of one
  std::atomic<bool> interrupted_ = false;   // Interrupt was called
  bool closed_ = false;                     // CloseConnections ran (call thread, or idle Interrupt)
};

absl::StatusOr<std::unique_ptr<Communicator>> GlooCommunicator::Create(CommunicatorOptions options,
                                                                       Endpoint endpoint,
                                                                       absl::Time deadline) {
  std::shared_ptr<LazyContext> context;
  std::unique_ptr<SocketMesh> mesh, payload_mesh;
  if (options.world_size > 1) {
    SHARDKIT_RETURN_IF_ERROR(AwaitMembers(*endpoint.store, endpoint.key_prefix, options.rank,
                                          options.world_size, deadline));
    try {
      context = std::make_shared<LazyContext>(endpoint.device, options.rank, options.world_size,
                                              endpoint.store, endpoint.key_prefix);
    } catch (...) {
      return Annotate(
          FromException(std::current_exception(), ""),
          absl::StrCat("Gloo context (rank ", options.rank, "/", options.world_size, ")"));
    }
    SHARDKIT_ASSIGN_OR_RETURN(
        mesh, SocketMesh::Connect(*endpoint.store, endpoint.key_prefix, options.rank,
                                  options.world_size, endpoint.address, deadline));
    SHARDKIT_ASSIGN_OR_RETURN(
        payload_mesh,
        SocketMesh::Connect(*endpoint.store, absl::StrCat(endpoint.key_prefix, "/payload"),
                            options.rank, options.world_size, endpoint.address, deadline));
  }
  return std::unique_ptr<Communicator>(new GlooCommunicator(std::move(options), std::move(endpoint),
                                                            std::move(context), std::move(mesh),
                                                            std::move(payload_mesh)));
}

absl::Status GlooCommunicator::Transfer(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                                        std::span<const RecvOp> recvs, absl::Time deadline) {
  if (sends.empty() && recvs.empty()) return absl::OkStatus();
  const absl::Duration budget = deadline - absl::Now();
  const std::vector<int> peers = Peers(sends, recvs);
  if (absl::Status connected = ConnectPairs(peers, seq, deadline); !connected.ok()) {
    if (interrupted_.load()) {
      return Fail(absl::CancelledError("connecting Gloo pairs: interrupted"), -1, {}, budget);
    }
    CloseConnections();
    return connected;
  }
  std::vector<std::unique_ptr<::gloo::transport::UnboundBuffer>> in, out;
  size_t recvs_done = 0, sends_done = 0;
  std::string step;
  absl::Status status;
  try {
    for (const RecvOp& r : recvs) {
      step = absl::StrCat("receiving ", r.size, " bytes from peer ", r.peer);
      in.push_back(context_->createUnboundBuffer(r.data, r.size));
      in.back()->recv(r.peer, tag);
    }
    for (const SendOp& s : sends) {
      step = absl::StrCat("sending ", s.size, " bytes to peer ", s.peer);
      // Gloo's buffer type is not const-correct; a send only reads.
      out.push_back(context_->createUnboundBuffer(const_cast<void*>(s.data), s.size));
      out.back()->send(s.peer, tag);
    }
    // The watch tells a peer that gave up on this call from one that gave up on a later call;
    // peers without a control connection it watches by their pairs' sockets.
    watch_->Arm(
        peers, seq,
        [&in, &out] {
          for (auto& buffer : in) buffer->abortWaitRecv();
          for (auto& buffer : out) buffer->abortWaitSend();
        },
        PairSockets(peers));
    // A false wait means the watch aborted the exchange (see below).
    for (; recvs_done < in.size(); ++recvs_done) {
      step = absl::StrCat("peer ", recvs[recvs_done].peer);
      if (!in[recvs_done]->waitRecv(Remaining(deadline))) {
        status = absl::AbortedError(step);
        break;
      }
    }
    for (; status.ok() && sends_done < out.size(); ++sends_done) {
      step = absl::StrCat("peer ", sends[sends_done].peer);
      if (!out[sends_done]->waitSend(Remaining(deadline))) {
        status = absl::AbortedError(step);
        break;
      }
    }
  } catch (...) {
    status = FromException(std::current_exception(), step);
  }
  std::optional<SocketMesh::Departure> lost = watch_->Disarm();  // nothing aborts after
  if (!status.ok() && interrupted_.load()) {
    return Fail(absl::CancelledError(absl::StrCat(step, ": interrupted")), -1, {}, budget);
  }
  // Gloo closes this rank's own pair connections when one of its waits times out: a connection
  // seen closed once the deadline has passed says nothing of the peer.
  const bool timed_out = absl::Now() >= deadline;
  if (!status.ok() && timed_out &&
      (!lost.has_value() || lost->how == SocketMesh::Departure::How::kConnectionClosed)) {
    lost.reset();
    status = absl::DeadlineExceededError(absl::StrCat(step, ": timed out"));
  }
  if (!status.ok() && lost.has_value() &&
      lost->how == SocketMesh::Departure::How::kConnectionClosed &&
      FinishAfterClose(in, out, recvs_done, sends_done, deadline)) {
    status = absl::OkStatus();  // the peer left after its part had all arrived
  }
  if (status.ok()) return status;
  if (lost.has_value()) {
    status = absl::UnavailableError(
        absl::StrCat(step, ": wait aborted: ", SocketMesh::DescribeDeparture(*lost)));
  }
  const TransferProgress progress =
      Progress(sends, recvs, in, out, recvs_done, sends_done, /*probe=*/!lost.has_value());
  status = Annotate(status, progress.ToString());
  // Peers without a control connection: say which of them closed their pairs' connections.
  if (!lost.has_value() && !timed_out) {
    for (const SocketMesh::Departure& d : ClosedSockets(PairSockets(peers))) {
      status = Annotate(status, SocketMesh::DescribeDeparture(d));
      if (!lost.has_value()) lost = d;
    }
  }
  // Gloo does not wake a receive whose peer died: say who has left, as the mesh sees it.
  if (std::string departures = DescribeDepartures(peers, status); !departures.empty()) {
    status = Annotate(status, departures);
  }
  // Closed before the buffers go: Gloo must not write into them afterwards. The gave-up markers
  // name the peer that made this rank give up, for ranks that never talked to it.
  return Fail(status, lost.has_value() ? CauseOf(*lost) : -1, progress.waited_on(), budget);
}

absl::Status GlooCommunicator::ExchangeControl(uint64_t /*tag*/, uint64_t seq,
                                               std::span<const SendOp> sends,
                                               std::span<const RecvOp> recvs, absl::Time deadline) {
  if (sends.empty() && recvs.empty()) return absl::OkStatus();
  std::vector<SocketMesh::Send> out;
  std::vector<SocketMesh::Recv> in;
  for (const SendOp& s : sends) out.push_back({s.peer, s.data, s.size});
  for (const RecvOp& r : recvs) in.push_back({r.peer, r.data, r.size});
  const absl::Duration budget = deadline - absl::Now();
  absl::Status status = mesh_->Exchange(out, in, deadline, seq);
  return status.ok() ? status : Fail(status, -1, mesh_->waited_on(), budget);
}

absl::Status GlooCommunicator::ExchangeSegments(uint64_t /*tag*/, uint64_t seq,
                                                std::span<const SendOp> sends,
                                                std::span<const RecvOp> recvs, absl::Time deadline,
                                                absl::FunctionRef<absl::Status(size_t)> arrived) {
  if (!sends.empty() || !recvs.empty()) {
    const absl::Duration budget = deadline - absl::Now();
    MeshPayload payload = MeshPayload::Of(world_size(), seq, sends, recvs);
    if (absl::Status status = payload.Move(*payload_mesh_, deadline); !status.ok()) {
      const int cause = MeshPayload::CauseOfFailure(*mesh_, *payload_mesh_, status, rank(),
                                                    world_size(), kDepartureGrace);
      return Fail(Annotate(status, "segment payload"), cause, payload_mesh_->waited_on(), budget);
    }
  }
  for (size_t i = 0; i < recvs.size(); ++i) SHARDKIT_RETURN_IF_ERROR(arrived(i));
  return absl::OkStatus();
}

absl::Status GlooCommunicator::Fail(absl::Status status, int cause,
                                    const std::vector<int>& waited_on, absl::Duration budget) {
  if (mesh_ == nullptr) return status;  // a world of one exchanges nothing
  if (interrupted_.load()) cause = rank() | SocketMesh::kInterruptedCause;  // why it gave up
  if (cause < 0) cause = mesh_->cause();
  if (cause < 0 && absl::IsDeadlineExceeded(status)) {
    // Out of time, and no peer was seen to leave: one may have stalled.
    const int stalled = FindStalledRank(*endpoint_.store, endpoint_.key_prefix, rank(), waited_on,
                                        StallGrace(budget));
    if (stalled >= 0) {
      cause = stalled | SocketMesh::kStalledCause;
      status = Annotate(status, DescribeCulprit(*SocketMesh::CulpritOf(cause)));
    }
  }
  CloseConnections(cause);
  if (std::optional<Culprit> culprit = SocketMesh::CulpritOf(mesh_->cause())) {
    SetCulprit(status, *culprit);
  }
  return status;
}

std::vector<std::pair<int, int>> GlooCommunicator::PairSockets(
    const std::vector<int>& peers) const {
  std::vector<std::pair<int, int>> sockets;
  for (int peer : peers) {
    const int fd = mesh_->connected(peer) ? -1 : context_->Socket(peer);
    if (fd >= 0) sockets.push_back({peer, fd});
  }
  return sockets;
}

bool GlooCommunicator::FinishAfterClose(Buffers& in, Buffers& out, size_t recvs_done,
                                        size_t sends_done, absl::Time deadline) noexcept {
  // The watch saw a pair's connection end with nothing left unread: what the peer sent has been
  // read, and Gloo completes those buffers within moments; waits still open after a grace never
  // will. The watch's abort may still be pending on each buffer (one false wait), hence two tries.
  const absl::Time until = std::min(deadline, absl::Now() + kCloseGrace);
  auto finish = [&](auto& buffers, size_t done, bool recv) {
    for (size_t i = done; i < buffers.size(); ++i) {
      bool ok = false;
      for (int attempt = 0; attempt < 2 && !ok; ++attempt) {
        ok = recv ? buffers[i]->waitRecv(Remaining(until)) : buffers[i]->waitSend(Remaining(until));
      }
      if (!ok) return false;
    }
    return true;
  };
  try {
    return finish(in, recvs_done, true) && finish(out, sends_done, false);
  } catch (...) {
    return false;  // timed out (Gloo has signalled every pair) or failed
  }
}

absl::Status GlooCommunicator::ConnectPairs(const std::vector<int>& peers, uint64_t seq,
                                            absl::Time deadline) {
  if (context_->Connected(peers)) return absl::OkStatus();
  // A peer that dies before connecting would leave this rank waiting for its address or its
  // connect until the deadline: the watch ends those waits too.
  watch_->Arm(peers, seq, [this] { context_->AbortConnect(); });
  absl::Status status = context_->ConnectPairs(peers, deadline);
  const std::optional<SocketMesh::Departure> lost = watch_->Disarm();
  if (status.ok()) return status;
  if (lost.has_value()) {
    // The step that was waiting ("connecting Gloo pair to rank 3: connect aborted") and why.
    status = absl::UnavailableError(
        absl::StrCat(status.message(), ": ", SocketMesh::DescribeDeparture(*lost)));
  }
  if (std::string departures = DescribeDepartures(peers, status); !departures.empty()) {
    status = Annotate(status, departures);
  }
  return status;
}

std::string GlooCommunicator::DescribeDepartures(const std::vector<int>& peers,
                                                 const absl::Status& status) const {
  std::string departures = mesh_->DescribeDepartures();
  if (departures.empty() && absl::IsUnavailable(status)) {
    (void)mesh_->Departures(peers, kDepartureGrace);  // returns at the first departure
    departures = mesh_->DescribeDepartures();
  }
  return departures;
}

void GlooCommunicator::Interrupt(bool idle) noexcept {
  if (mesh_ == nullptr) return;  // a world of one never waits
  interrupted_.store(true);
  mesh_->Interrupt();
  payload_mesh_->Interrupt();
  watch_->Interrupt();  // the Gloo pairs' waits, and a connect in progress (AbortConnect)
  if (idle) CloseConnections(rank() | SocketMesh::kInterruptedCause, /*between_calls=*/true);
}

void GlooCommunicator::CloseConnections(int cause, bool between_calls) noexcept {
  if (closed_) return;
  closed_ = true;
  if (watch_ != nullptr) watch_->Stop();  // it must not look at the mesh while it closes
  if (mesh_ != nullptr) mesh_->Close(cause, between_calls);
  if (payload_mesh_ != nullptr) payload_mesh_->Close(cause, between_calls);
  try {
    context_->closeConnections();
  } catch (...) {
    // Best effort: the communicator is poisoned either way.
  }
}

absl::StatusOr<std::unique_ptr<Communicator>> GlooCommunicator::CreateSubgroup(
    const std::vector<int>& members, int new_rank, uint64_t split_id, absl::Time deadline) {
  if (new_rank < 0) return std::unique_ptr<Communicator>();  // not a member: nothing to join
  CommunicatorOptions options{new_rank, static_cast<int>(members.size()), backend(),
                              default_timeout()};
  Endpoint endpoint = endpoint_;
  endpoint.key_prefix = absl::StrCat(endpoint_.key_prefix, "/split", split_id);
  return Create(std::move(options), std::move(endpoint), deadline);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const ConnectOptions& options) {
  IgnoreSigpipe();
  RaiseDescriptorLimit();
  const absl::Time deadline = absl::Now() + options.timeout;
  Endpoint endpoint{options.store, options.key_prefix, nullptr};
  if (options.world_size > 1) {
    ::gloo::transport::tcp::attr attr;
    if (!options.ifname.empty()) {
      attr.iface = options.ifname;
    } else {
      attr.hostname = options.hostname.empty() ? env::kLocalHostname : options.hostname;
    }
    try {
      const ::gloo::transport::tcp::attr resolved = ::gloo::transport::tcp::CreateDeviceAttr(attr);
      endpoint.address = resolved.ai_addr;
      endpoint.device = ::gloo::transport::tcp::CreateDevice(resolved);
    } catch (...) {
      absl::Status status = FromException(std::current_exception(), "");
      return absl::InvalidArgumentError(absl::StrCat(
          "Gloo cannot use ", options.ifname.empty() ? "hostname " : "interface ",
          options.ifname.empty() ? attr.hostname : attr.iface, ": ", status.message()));
    }
  }
  CommunicatorOptions comm_options{options.rank, options.world_size, "gloo", options.timeout};
  return GlooCommunicator::Create(std::move(comm_options), std::move(endpoint), deadline);
}

SHARDKIT_REGISTER_BACKEND("gloo", &CreateGlooCommunicator);

}  // namespace shardkit::gloo_backend
