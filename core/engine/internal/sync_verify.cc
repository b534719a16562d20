#include "core/engine/internal/sync_verify.h"

#include <algorithm>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/engine/internal/box_mover.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/internal/sync_tensors.h"
#include "nlohmann/json.hpp"
#include "specs/fingerprint.h"

namespace shardkit::internal {
namespace {

// A piece's name, the same on its sender and its receiver.
std::string PieceId(const SyncPiece& p) {
  return absl::StrCat(p.parameter, ".", p.destination_shard, ".", p.source_shard, ".", p.part);
}

// The first 8 bytes of SHA-256 of the piece's bytes, as hex.
absl::StatusOr<std::string> Digest(const Tensor& view) {
  Tensor host = view;
  if (!view.device().is_cpu() || !view.IsContiguous()) {
    SHARDKIT_ASSIGN_OR_RETURN(host, view.Clone(Device::Cpu()));
  }
  const specs::Sha256Digest d =
      specs::Sha256(std::string_view(reinterpret_cast<const char*>(host.data()), host.nbytes()));
  return specs::FormatFingerprint(d).substr(7, 16);
}

// This rank's digests: of what it sent (by piece id) and of what it received.
absl::StatusOr<nlohmann::json> Digests(const SyncPlan& plan, MoverState& state,
                                       const Module* source, const Module* destination) {
  SideTensors sources(plan, source, state.positions[2], "source");
  SideTensors destinations(plan, destination, state.positions[1], "destination");
  auto digest = [](SideTensors& side, size_t parameter, size_t shard,
                   const specs::Box& box) -> absl::StatusOr<std::string> {
    SHARDKIT_ASSIGN_OR_RETURN(SideTensors::Resolved t, side.Get(parameter, shard));
    SHARDKIT_ASSIGN_OR_RETURN(Tensor view, View(t, box));
    return Digest(view);
  };
  nlohmann::json sent = nlohmann::json::object(), received = nlohmann::json::array();
  for (const SyncPiece& p : plan.sends()) {
    SHARDKIT_ASSIGN_OR_RETURN(sent[PieceId(p)],
                              digest(sources, p.parameter, p.source_shard, p.box));
  }
  for (const SyncPiece& p : plan.receives()) {
    SHARDKIT_ASSIGN_OR_RETURN(std::string got,
                              digest(destinations, p.parameter, p.destination_shard, p.box));
    if (p.from == p.to) {
      SHARDKIT_ASSIGN_OR_RETURN(sent[PieceId(p)],
                                digest(sources, p.parameter, p.source_shard, p.box));
    }
    received.push_back({PieceId(p), got, p.parameter, p.from, p.to, p.box.offsets, p.box.sizes});
  }
  return nlohmann::json{{"sent", sent}, {"received", received}};
}

// verify: every rank's digests of what it sent and received, all-gathered; every rank names the
// same first mismatch (or the first rank that could not compute its digests).
}  // namespace

absl::Status VerifySync(const SyncPlan& plan, MoverState& state, const Module* source,
                        const Module* destination, Communicator& comm, const CallOptions& call) {
  absl::StatusOr<nlohmann::json> digests = Digests(plan, state, source, destination);
  const std::string mine = digests.ok()
                               ? digests->dump()
                               : nlohmann::json{{"error", digests.status().ToString()}}.dump();
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(ConstBuffer(mine), call));
  std::vector<nlohmann::json> views;
  nlohmann::json senders = nlohmann::json::object();
  for (size_t r = 0; r < all.size(); ++r) {
    views.push_back(nlohmann::json::parse(all[r]));
    if (views.back().contains("error")) {
      return absl::FailedPreconditionError(
          absl::StrCat("Sync verify: rank ", r, ": ", views.back()["error"].get<std::string>()));
    }
    senders.update(views.back()["sent"]);
  }
  std::vector<nlohmann::json> bad;
  for (const nlohmann::json& view : views) {
    for (const nlohmann::json& r : view["received"]) {
      if (senders.value(r[0].get<std::string>(), "") != r[1]) bad.push_back(r);
    }
  }
  if (bad.empty()) return absl::OkStatus();
  std::sort(bad.begin(), bad.end(), [](const auto& a, const auto& b) { return a[0] < b[0]; });
  const nlohmann::json& r = bad.front();
  return absl::DataLossError(absl::StrCat(
      "Sync verify: parameter ", QuoteName(plan.names()[r[2].get<size_t>()]), " piece at ",
      r[5].dump(), " of ", r[6].dump(), " from rank ", r[3].dump(), " to rank ", r[4].dump(),
      ": the sender's digest is ", senders.value(r[0].get<std::string>(), "?"), ", the receiver's ",
      r[1].get<std::string>(), " (", bad.size(), " pieces differ)"));
}

}  // namespace shardkit::internal
