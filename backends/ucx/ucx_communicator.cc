#include "backends/ucx/ucx_communicator.h"

#include <algorithm>
#include <atomic>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "backends/ucx/internal/registrations.h"
#include "backends/ucx/internal/ucx_context.h"
#include "backends/ucx/internal/worker.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"
#include "core/comm/culprit.h"
#include "core/comm/stall_search.h"
#include "core/store/rendezvous.h"

namespace shardkit::ucx_backend {
namespace {

// A UCP tag is the call's tag above the sender's rank: receives match their peer by the tag.
constexpr int kRankBits = 20;
constexpr ucp_tag_t kFullMask = ~ucp_tag_t{0};
ucp_tag_t Tag(uint64_t tag, int sender) {
  return (tag << kRankBits) | static_cast<ucp_tag_t>(sender);
}

// One posted message of an exchange.
struct Message {
  int peer = -1;
  size_t size = 0;
  bool recv = false;
  void* request = nullptr;  // UCP's, until it completes
  bool done = false;
  ucs_status_t status = UCS_OK;
};

// Records what a posted operation returned: done at once (null), failed, or pending.
void Posted(Message& m, void* request) {
  if (request == nullptr) {
    m.done = true;
  } else if (UCS_PTR_IS_ERR(request)) {
    m.done = true;
    m.status = UCS_PTR_STATUS(request);
  } else {
    m.request = request;
  }
}

// kUnavailable with `message`, blaming `culprit`.
absl::Status Blaming(const std::string& message, const Culprit& culprit) {
  absl::Status status = absl::UnavailableError(message);
  SetCulprit(status, culprit);
  return status;
}

class UcxCommunicator final : public Communicator {
 public:
  static absl::StatusOr<std::unique_ptr<Communicator>> Create(CommunicatorOptions options,
                                                              std::shared_ptr<Store> store,
                                                              std::string prefix,
                                                              absl::Time deadline);
  std::string EndpointInfo(int peer) const {
    return worker_ != nullptr ? worker_->EndpointInfo(peer) : "";
  }

 protected:
  absl::Status Exchange(uint64_t tag, uint64_t seq, std::span<const SendOp> sends,
                        std::span<const RecvOp> recvs, absl::Time deadline) override {
    return Transfer(tag, sends, recvs, deadline, nullptr);
  }
  absl::Status ExchangeSegments(uint64_t tag, uint64_t /*seq*/, std::span<const SendOp> sends,
                                std::span<const RecvOp> recvs, absl::Time deadline,
                                absl::FunctionRef<absl::Status(size_t)> arrived) override {
    return Transfer(tag, sends, recvs, deadline, &arrived);
  }
  absl::StatusOr<std::unique_ptr<Communicator>> CreateSubgroup(const std::vector<int>& members,
                                                               int new_rank, uint64_t split_id,
                                                               absl::Time deadline) override;
  bool SupportsDevice(const Device& device) const override { return device.is_cpu(); }
  bool Interruptible() const override { return true; }
  void Interrupt(bool idle) noexcept override;

 private:
  UcxCommunicator(CommunicatorOptions options, std::shared_ptr<Store> store, std::string prefix,
                  std::unique_ptr<Worker> worker)
      : Communicator(std::move(options)),
        store_(std::move(store)),
        prefix_(std::move(prefix)),
        worker_(std::move(worker)) {}

  absl::Status Transfer(uint64_t tag, std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                        absl::Time deadline,
                        const absl::FunctionRef<absl::Status(size_t)>* arrived);
  // Posts every receive, then every send; `handles`: the registrations their messages carry.
  // Errors: a peer's endpoint or address.
  absl::Status Post(uint64_t tag, std::span<const SendOp> sends, std::span<const RecvOp> recvs,
                    std::vector<Message>& in, std::vector<Message>& out,
                    std::vector<ucp_mem_h>& handles, absl::Time deadline);
  // Marks the messages that have completed and counts those still `pending`; the first one that
  // failed, if any.
  const Message* Poll(std::vector<Message>& in, std::vector<Message>& out, size_t& pending);
  // The error of a failed message, naming its peer.
  absl::Status MessageError(const Message& m) const;
  // Every ~100 ms of a wait: fails once a rank of this communicator has given up.
  absl::Status CheckGaveUp() const;
  // Records `culprit` as the one to blame, unless a rank gave up first (Fail's record).
  void RecordGaveUp(const Culprit& culprit);
  std::string GaveUpKey() const { return absl::StrCat(prefix_, "/ucx/gave_up"); }
  // Who gave up first and the rank it blamed, if one has; `wait`: how long to wait for the record
  // (zero: only look).
  std::optional<std::pair<int, Culprit>> ReadGaveUp(
      absl::Duration wait = absl::ZeroDuration()) const;
  // After a failed exchange: blames a rank (the first gave-up record, else a peer seen to end or
  // a stalled one), records it for the others, cancels everything pending, shuts the worker.
  absl::Status Fail(absl::Status status, std::vector<Message>& in, std::vector<Message>& out,
                    absl::Duration budget);

  const std::shared_ptr<Store> store_;
  const std::string prefix_;
  std::unique_ptr<Worker> worker_;         // null for a world of one
  std::atomic<bool> interrupted_ = false;  // Interrupt was called
};

absl::StatusOr<std::unique_ptr<Communicator>> UcxCommunicator::Create(CommunicatorOptions options,
                                                                      std::shared_ptr<Store> store,
                                                                      std::string prefix,
                                                                      absl::Time deadline) {
  std::unique_ptr<Worker> worker;
  if (options.world_size > 1) {
    if (options.world_size > (1 << kRankBits)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the UCX backend takes at most ", 1 << kRankBits, " ranks, not ", options.world_size));
    }
    SHARDKIT_ASSIGN_OR_RETURN(UcxContext context, SharedContext());
    SHARDKIT_ASSIGN_OR_RETURN(worker, Worker::Create(context, store, prefix, options.rank));
    SHARDKIT_RETURN_IF_ERROR(
        AwaitMembers(*store, prefix, options.rank, options.world_size, deadline));
  }
  return std::unique_ptr<Communicator>(new UcxCommunicator(std::move(options), std::move(store),
                                                           std::move(prefix), std::move(worker)));
}

absl::Status UcxCommunicator::Transfer(uint64_t tag, std::span<const SendOp> sends,
                                       std::span<const RecvOp> recvs, absl::Time deadline,
                                       const absl::FunctionRef<absl::Status(size_t)>* arrived) {
  if (sends.empty() && recvs.empty()) return absl::OkStatus();
  if (worker_ == nullptr) {
    return absl::FailedPreconditionError("the UCX worker was shut down by an earlier failure");
  }
  const absl::Duration budget = deadline - absl::Now();
  std::vector<Message> in(recvs.size()), out(sends.size());
  std::vector<ucp_mem_h> handles;
  absl::Status status = Post(tag, sends, recvs, in, out, handles, deadline);
  size_t reported = 0;
  const Message* failed = nullptr;
  // The peers whose messages are not all in yet.
  auto waited_on = [&] {
    std::vector<int> waiting;
    for (const std::vector<Message>* messages : {&in, &out}) {
      for (const Message& m : *messages) {
        if (!m.done) waiting.push_back(m.peer);
      }
    }
    return waiting;
  };
  auto done = [&] {
    size_t pending = 0;
    failed = Poll(in, out, pending);
    if (failed != nullptr || !status.ok()) return true;
    while (arrived != nullptr && reported < in.size() && in[reported].done) {
      status = (*arrived)(reported++);
      if (!status.ok()) return true;
    }
    if (pending == 0) return true;  // a peer that left after its part does not matter
    const std::optional<Worker::PeerFailure> lost = worker_->failed_peer();
    if (!lost.has_value()) return false;
    const std::vector<int> waiting = waited_on();
    if (std::count(waiting.begin(), waiting.end(), lost->peer) == 0) return false;
    status = Blaming(absl::StrCat("peer ", lost->peer,
                                  ": its UCX endpoint failed: ", worker_->ucp().Text(lost->status)),
                     Culprit{lost->peer, Culprit::How::kVanished});
    return true;
  };
  auto tick = [&] {
    if (interrupted_.load()) {  // Abort: this rank's program abandons the call
      absl::Status cancelled = absl::CancelledError("interrupted");
      SetCulprit(cancelled, Culprit{rank(), Culprit::How::kInterrupted});
      return cancelled;
    }
    if (std::optional<int> gone = worker_->GonePeer(waited_on())) {
      return Blaming(absl::StrCat("peer ", *gone, ": its process has ended (killed or crashed?)"),
                     Culprit{*gone, Culprit::How::kVanished});
    }
    return CheckGaveUp();
  };
  if (status.ok()) {
    absl::Status waited = worker_->Wait(done, deadline, tick);
    if (status.ok()) status = waited;
  }
  if (status.ok() && failed != nullptr) status = MessageError(*failed);
  Registrations& registrations = Registrations::Shared(worker_->context());
  if (!status.ok()) {
    registrations.Withdraw(handles);  // at once: Fail may take seconds
    status = Fail(status, in, out, budget);
  }
  registrations.Done(handles);  // nothing of this exchange is in flight now (Fail shut the worker)
  return status;
}

absl::Status UcxCommunicator::Post(uint64_t tag, std::span<const SendOp> sends,
                                   std::span<const RecvOp> recvs, std::vector<Message>& in,
                                   std::vector<Message>& out, std::vector<ucp_mem_h>& handles,
                                   absl::Time deadline) {
  const UcpLibrary& ucp = worker_->ucp();
  Registrations& registrations = Registrations::Shared(worker_->context());
  // A message from or into a registered allocator block carries the block's handle.
  auto params = [&](const void* data, size_t size, const Device& device) {
    ucp_request_param_t p{};
    if (!device.is_cpu()) return p;
    if (ucp_mem_h memh = registrations.Find(data, size)) {
      p.op_attr_mask = UCP_OP_ATTR_FIELD_MEMH;
      p.memh = memh;
      handles.push_back(memh);
    }
    return p;
  };
  for (size_t i = 0; i < recvs.size(); ++i) in[i] = Message{recvs[i].peer, recvs[i].size, true};
  for (size_t i = 0; i < sends.size(); ++i) out[i] = Message{sends[i].peer, sends[i].size, false};
  for (size_t i = 0; i < recvs.size(); ++i) {
    const RecvOp& r = recvs[i];
    SHARDKIT_RETURN_IF_ERROR(worker_->Watch(r.peer, deadline));
    const ucp_request_param_t p = params(r.data, r.size, r.device);
    Posted(in[i],
           ucp.tag_recv_nbx(worker_->handle(), r.data, r.size, Tag(tag, r.peer), kFullMask, &p));
  }
  for (size_t i = 0; i < sends.size(); ++i) {
    const SendOp& s = sends[i];
    SHARDKIT_ASSIGN_OR_RETURN(ucp_ep_h ep, worker_->Endpoint(s.peer, deadline));
    const ucp_request_param_t p = params(s.data, s.size, s.device);
    Posted(out[i], ucp.tag_send_nbx(ep, s.data, s.size, Tag(tag, rank()), &p));
  }
  return absl::OkStatus();
}

const Message* UcxCommunicator::Poll(std::vector<Message>& in, std::vector<Message>& out,
                                     size_t& pending) {
  const UcpLibrary& ucp = worker_->ucp();
  const Message* failed = nullptr;
  pending = 0;
  auto poll = [&](Message& m) {
    if (!m.done) {
      ucp_tag_recv_info_t info{};
      m.status = m.recv ? ucp.tag_recv_request_test(m.request, &info)
                        : ucp.request_check_status(m.request);
      if (m.status == UCS_INPROGRESS) {
        ++pending;
        return;
      }
      if (m.recv && m.status == UCS_OK && info.length != m.size) {
        m.status = UCS_ERR_MESSAGE_TRUNCATED;
      }
      ucp.request_free(m.request);
      m.request = nullptr;
      m.done = true;
    }
    if (m.status != UCS_OK && failed == nullptr) failed = &m;
  };
  for (Message& m : in) poll(m);
  for (Message& m : out) poll(m);
  return failed;
}

absl::Status UcxCommunicator::MessageError(const Message& m) const {
  // A transfer fails when its peer is gone (killed: CMA cannot read it) or closed its endpoint.
  const bool gone = worker_->GonePeer({m.peer}).has_value();
  return Blaming(absl::StrCat(m.recv ? "receiving " : "sending ", m.size,
                              m.recv ? " bytes from peer " : " bytes to peer ", m.peer, ": ",
                              worker_->ucp().Text(m.status)),
                 Culprit{m.peer, gone ? Culprit::How::kVanished : Culprit::How::kLeft});
}

absl::Status UcxCommunicator::CheckGaveUp() const {
  const std::optional<std::pair<int, Culprit>> gave_up = ReadGaveUp();
  if (!gave_up.has_value()) return absl::OkStatus();
  return Blaming(
      absl::StrCat("rank ", gave_up->first, " gave up: ", DescribeCulprit(gave_up->second)),
      gave_up->second);
}

std::optional<std::pair<int, Culprit>> UcxCommunicator::ReadGaveUp(absl::Duration wait) const {
  if (wait == absl::ZeroDuration()) {
    absl::StatusOr<bool> there = store_->Check({GaveUpKey()});
    if (!there.ok() || !*there) return std::nullopt;
    wait = absl::Seconds(1);
  }
  absl::StatusOr<std::string> record = store_->Get(GaveUpKey(), wait);
  if (!record.ok()) return std::nullopt;
  // "<writer> <culprit rank> <how>"
  std::vector<std::string> fields = absl::StrSplit(*record, ' ');
  int writer = -1, culprit = -1, how = 0;
  if (fields.size() != 3 || !absl::SimpleAtoi(fields[0], &writer) ||
      !absl::SimpleAtoi(fields[1], &culprit) || !absl::SimpleAtoi(fields[2], &how)) {
    return std::nullopt;
  }
  return std::make_pair(writer, Culprit{culprit, static_cast<Culprit::How>(how)});
}

absl::Status UcxCommunicator::Fail(absl::Status status, std::vector<Message>& in,
                                   std::vector<Message>& out, absl::Duration budget) {
  TransferProgress progress;
  for (const Message& m : in) {
    progress.AddRecv(m.peer, m.size, m.done && m.status == UCS_OK ? m.size : 0);
  }
  for (const Message& m : out) {
    progress.AddSend(m.peer, m.size, m.done && m.status == UCS_OK ? m.size : 0);
  }
  status = Annotate(status, progress.ToString());
  // This rank's own view: a peer seen to end (set by the wait), or a stalled one after the
  // deadline; itself, having given up, when it knows no one.
  std::optional<Culprit> culprit = GetCulprit(status);
  if (!culprit.has_value() && absl::IsDeadlineExceeded(status)) {
    const int stalled =
        FindStalledRank(*store_, prefix_, rank(), progress.waited_on(), StallGrace(budget));
    if (stalled >= 0) culprit = Culprit{stalled, Culprit::How::kStalled};
  }
  // The first rank to give up records whom it blames; every rank then blames that one, so the
  // ranks that saw only the fall-out (a peer that gave up and left) name the same rank.
  RecordGaveUp(culprit.value_or(Culprit{rank(), Culprit::How::kLeft}));
  if (std::optional<std::pair<int, Culprit>> first = ReadGaveUp(absl::Seconds(1))) {
    culprit = first->second;
  }
  if (culprit.has_value()) {
    status = Annotate(status, DescribeCulprit(*culprit));
    SetCulprit(status, *culprit);
  }
  // Receives are cancelled; sends end with their endpoints. Every request still pending is handed
  // back to UCX first, as its API asks (UCX checks, when it destroys a worker, that its caller
  // released what it held: the close of Worker::Shutdown tripped that). Destroying the worker ends
  // them: UCX writes into no buffer of this exchange afterwards.
  const UcpLibrary& ucp = worker_->ucp();
  for (std::vector<Message>* messages : {&in, &out}) {
    for (Message& m : *messages) {
      if (m.done || m.request == nullptr) continue;
      if (m.recv) ucp.request_cancel(worker_->handle(), m.request);
      ucp.request_free(m.request);
      m.request = nullptr;
    }
  }
  worker_->Shutdown(/*force=*/true);
  return status;
}

void UcxCommunicator::RecordGaveUp(const Culprit& culprit) {
  absl::StatusOr<int64_t> order = store_->Add(absl::StrCat(GaveUpKey(), "_count"), 1);
  if (order.ok() && *order == 1) {
    (void)store_->Set(GaveUpKey(),
                      absl::StrCat(rank(), " ", culprit.rank, " ", static_cast<int>(culprit.how)));
  }
}

void UcxCommunicator::Interrupt(bool idle) noexcept {
  if (worker_ == nullptr) return;  // a world of one never waits; or shut down already
  interrupted_.store(true);        // the call in flight fails at its next tick (<= 100 ms)
  if (!idle) return;
  // No call in flight: the peers learn it from the record, as from a failed call's.
  RecordGaveUp(Culprit{rank(), Culprit::How::kInterrupted});
  worker_->Shutdown(/*force=*/true);
}

absl::StatusOr<std::unique_ptr<Communicator>> UcxCommunicator::CreateSubgroup(
    const std::vector<int>& members, int new_rank, uint64_t split_id, absl::Time deadline) {
  if (new_rank < 0) return std::unique_ptr<Communicator>();  // not a member: nothing to join
  CommunicatorOptions options{new_rank, static_cast<int>(members.size()), backend(),
                              default_timeout()};
  return Create(std::move(options), store_, absl::StrCat(prefix_, "/split", split_id), deadline);
}

}  // namespace

absl::StatusOr<std::unique_ptr<Communicator>> CreateUcxCommunicator(const ConnectOptions& options) {
  const absl::Time deadline = absl::Now() + options.timeout;
  CommunicatorOptions comm_options{options.rank, options.world_size, "ucx", options.timeout};
  return UcxCommunicator::Create(std::move(comm_options), options.store, options.key_prefix,
                                 deadline);
}

absl::StatusOr<std::string> UcxEndpointInfo(const Communicator& comm, int peer) {
  const auto* ucx = dynamic_cast<const UcxCommunicator*>(&comm);
  if (ucx == nullptr) {
    return absl::InvalidArgumentError(
        absl::StrCat("not a UCX communicator (backend \"", comm.backend(), "\")"));
  }
  std::string info = ucx->EndpointInfo(peer);
  if (info.empty()) {
    return absl::NotFoundError(absl::StrCat("no UCX endpoint to peer ", peer, " (yet)"));
  }
  return info;
}

}  // namespace shardkit::ucx_backend
