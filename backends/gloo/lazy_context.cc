#include "backends/gloo/lazy_context.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/strings/str_cat.h"
#include "backends/gloo/gloo_status.h"
#include "backends/gloo/pair_socket.h"
#include "core/base/status_macros.h"
#include "gloo/transport/context.h"
#include "gloo/transport/tcp/address.h"

namespace shardkit::gloo_backend {
namespace {

// How long one store read may wait before AbortConnect is looked at again.
constexpr absl::Duration kStoreReadSlice = absl::Milliseconds(50);

// Whether this side of a pair connects actively, by the rule of Gloo's tcp::Pair::connect
// (gloo/transport/tcp/pair.cc, 2022 snapshot): the side whose listening address is the greater
// connects, comparing the IP address bytes, then the ports as stored (network byte order). Must
// agree with Gloo only for the order of the connects (see the header), not for their outcome.
bool ConnectsActively(const sockaddr_storage& self, const sockaddr_storage& peer) {
  if (self.ss_family == AF_INET && peer.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(self);
    const auto& b = reinterpret_cast<const sockaddr_in&>(peer);
    const int order = std::memcmp(&a.sin_addr, &b.sin_addr, sizeof(a.sin_addr));
    return order != 0 ? order > 0 : a.sin_port > b.sin_port;
  }
  if (self.ss_family == AF_INET6 && peer.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(self);
    const auto& b = reinterpret_cast<const sockaddr_in6&>(peer);
    const int order = std::memcmp(&a.sin6_addr, &b.sin6_addr, sizeof(a.sin6_addr));
    return order != 0 ? order > 0 : a.sin6_port > b.sin6_port;
  }
  return false;  // Gloo's connect rejects mismatched families itself
}

// A pair's timeout for a connect that must end by `deadline`: Gloo waits 5 times a pair's timeout
// for its connect (tcp::Pair::waitUntil).
std::chrono::milliseconds PairTimeout(absl::Time deadline) {
  return std::chrono::milliseconds((Remaining(deadline).count() + 4) / 5);
}

std::string Describe(int peer) { return absl::StrCat("connecting Gloo pair to rank ", peer); }

absl::Status Aborted() { return absl::AbortedError("connect aborted"); }

}  // namespace

struct LazyContext::Pending {
  int peer;
  ::gloo::transport::Pair* pair;
  std::vector<char> address;  // the peer's pair toward this rank
  bool active = false;        // whether this side connects (see ConnectsActively)
};

LazyContext::LazyContext(std::shared_ptr<::gloo::transport::Device> device, int rank, int size,
                         std::shared_ptr<Store> store, std::string key_prefix)
    : ::gloo::Context(rank, size),
      store_(std::move(store)),
      key_prefix_(std::move(key_prefix)),
      connected_(size, false),
      sockets_(size, -1) {
  transportContext_ = device->createContext(rank, size);
  device_ = std::move(device);
}

bool LazyContext::Connected(const std::vector<int>& peers) const {
  return std::all_of(peers.begin(), peers.end(), [&](int peer) { return connected_[peer]; });
}

absl::Status LazyContext::ConnectPairs(const std::vector<int>& peers, absl::Time deadline) {
  std::vector<int> missing;
  for (int peer : peers) {
    if (!connected_[peer]) missing.push_back(peer);
  }
  if (missing.empty()) return absl::OkStatus();
  // Every address is published before any is read, so no rank waits for one that waits for it.
  SHARDKIT_RETURN_IF_ERROR(CreateAndPublish(missing, deadline));
  std::vector<Pending> pending;
  for (int peer : missing) pending.push_back({peer, transportContext_->getPair(peer).get()});
  if (!StartConnecting(pending)) return Annotate(Aborted(), Describe(missing.front()));
  const absl::Status status = ConnectAll(pending, deadline);
  StopConnecting();
  if (!status.ok()) return status;
  for (int peer : missing) connected_[peer] = true;
  FindSockets(pending);
  return absl::OkStatus();
}

void LazyContext::FindSockets(const std::vector<Pending>& pending) {
  std::vector<PairEnds> ends;
  for (const Pending& p : pending) {
    PairEnds e;
    e.self = dynamic_cast<const ::gloo::transport::tcp::Address&>(p.pair->address()).getSockaddr();
    e.peer = ::gloo::transport::tcp::Address(p.address).getSockaddr();
    e.active = p.active;
    ends.push_back(e);
  }
  const std::vector<int> found = FindPairSockets(ends);
  for (size_t i = 0; i < pending.size(); ++i) sockets_[pending[i].peer] = found[i];
}

int LazyContext::Socket(int peer) const { return sockets_[peer]; }

absl::Status LazyContext::CreateAndPublish(const std::vector<int>& peers, absl::Time deadline) {
  transportContext_->setTimeout(PairTimeout(deadline));
  for (int peer : peers) {
    std::vector<char> address;
    try {
      address = transportContext_->createPair(peer)->address().bytes();  // listens at once
    } catch (...) {
      return FromException(std::current_exception(), Describe(peer));
    }
    const absl::Status status =
        store_->Set(Key(rank, peer), std::string_view(address.data(), address.size()));
    if (!status.ok()) return Annotate(status, Describe(peer) + ": publishing this rank's address");
  }
  return absl::OkStatus();
}

absl::Status LazyContext::ConnectAll(std::vector<Pending>& pending, absl::Time deadline) {
  for (Pending& p : pending) {
    if (absl::Status status = ReadAddress(p, deadline); !status.ok()) {
      return Annotate(status, Describe(p.peer));
    }
  }
  // Active connects first: they wait for no other rank's thread. Then the passive waits, each for
  // a peer whose own active connects (this one among them) come before its passive waits.
  std::stable_partition(pending.begin(), pending.end(), [](const Pending& p) { return p.active; });
  for (const Pending& p : pending) {
    if (absl::Status status = Connect(p, deadline); !status.ok()) {
      return Annotate(status, Describe(p.peer));
    }
  }
  return absl::OkStatus();
}

absl::Status LazyContext::ReadAddress(Pending& p, absl::Time deadline) {
  const std::string key = Key(p.peer, rank);
  for (;;) {
    if (aborted_) return Aborted();
    const absl::Duration wait =
        std::clamp(deadline - absl::Now(), absl::ZeroDuration(), kStoreReadSlice);
    absl::StatusOr<std::string> value = store_->Get(key, wait);
    if (value.ok()) {
      p.address.assign(value->begin(), value->end());
      break;
    }
    if (!absl::IsDeadlineExceeded(value.status())) return value.status();
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "the call's deadline passed before rank ", p.peer, " published its address (", key, ")"));
    }
  }
  try {
    const auto& self = dynamic_cast<const ::gloo::transport::tcp::Address&>(p.pair->address());
    p.active = ConnectsActively(self.getSockaddr(),
                                ::gloo::transport::tcp::Address(p.address).getSockaddr());
  } catch (...) {
    return FromException(std::current_exception(), "reading its address");
  }
  return absl::OkStatus();
}

absl::Status LazyContext::Connect(const Pending& p, absl::Time deadline) {
  if (aborted_) return Aborted();
  if (absl::Now() >= deadline) {
    return absl::DeadlineExceededError("the call's deadline passed before connecting");
  }
  try {
    p.pair->connect(p.address);
  } catch (...) {
    return FromException(std::current_exception(), "");
  }
  // A pair that AbortConnect closed ends its connect without an error.
  return aborted_ ? Aborted() : absl::OkStatus();
}

bool LazyContext::StartConnecting(const std::vector<Pending>& pending) {
  std::lock_guard<std::mutex> lock(mu_);
  if (aborted_) return false;
  for (const Pending& p : pending) connecting_.push_back(p.pair);
  return true;
}

void LazyContext::StopConnecting() {
  std::lock_guard<std::mutex> lock(mu_);
  connecting_.clear();
}

void LazyContext::AbortConnect() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  aborted_ = true;
  for (::gloo::transport::Pair* pair : connecting_) {
    try {
      pair->close();  // wakes a connect waiting on it (Gloo's wait ends once the pair is closed)
    } catch (...) {
      // Best effort: the exchange fails either way.
    }
  }
}

std::string LazyContext::Key(int from, int to) const {
  return absl::StrCat(key_prefix_, "/gloo/", from, "/", to);
}

}  // namespace shardkit::gloo_backend
