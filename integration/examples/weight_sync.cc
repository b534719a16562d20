// weight_sync --trainer-ranks M [--steps S] [--push-every K] [--mib B] [--params P]
//             [--server-plan PLAN.json [--allow-replicated-only]]
// Weight sync from a training group to a serving group (core/engine/sync.h), every rank of
// one `shardkit launch --nproc W` (ranks 0..M-1 train, M..W-1 serve) or of two launches joined
// (`--world W --rank-offset K --store URL`):
//
//   ./tools/shardkit launch --nproc 4 -- bazel-bin/integration/examples/weight_sync --trainer-ranks
//   2
//
// The trainers hold P float32 parameters "layers.i.weight" [rows, 256] of B MiB in all, chunked on
// dim 0 over the trainer ranks, and change them deterministically every step. Every K steps they
// push into the servers, whose layout chunks dim 1 over the server ranks (or follows PLAN.json's
// rules, bound over the server group; unmatched parameters are replicated, idle rules are warned
// about, and a plan that shards nothing is refused unless --allow-replicated-only). The plan is
// made once.
// Each push runs with verify (per-piece digests, sender against receiver); then every server
// checks its shards bit-exactly against the step's values and uses them: for a fixed x it computes
// its part of y = x·Wᵀ for every parameter, and rank M sums the servers' parts and compares them
// with the trainers' y (within 1e-5). Rank M prints "push N: P parameters, X MiB, T s, verified"
// per push. Exit 0 only if every push was verified; 2 for an invalid request (flags, a
// --trainer-ranks that leaves no server); 1 otherwise (the error on
// stderr).
#include <cmath>
#include <csignal>
#include <cstdio>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "core/base/status_macros.h"
#include "core/comm/collective_status.h"
#include "core/comm/connect.h"
#include "core/engine/module.h"
#include "core/engine/sync.h"
#include "core/os/files.h"
#include "integration/flags/flags.h"
#include "specs/layout.h"
#include "specs/plan.h"
#include "specs/spec_json.h"

namespace shardkit::weight_sync {
namespace {

constexpr char kCommand[] = "weight_sync";
constexpr int64_t kCols = 256;

struct Flags {
  int64_t trainer_ranks = 0, steps = 4, push_every = 2, mib = 8, params = 4;
  std::string server_plan;
  bool allow_replicated_only = false;
};

// W[i][r, c] after `step` steps: exact in float32.
float Value(int64_t param, int64_t row, int64_t col, int64_t step) {
  return static_cast<float>((param * 7 + row * 31 + col * 17 + step * 13) % 4096) / 64.0f;
}

float X(int64_t col) { return static_cast<float>(col % 7 - 3) / 8.0f; }

int64_t Rows(const Flags& f) {
  return std::max<int64_t>(1, (f.mib << 20) / f.params / (kCols * 4));
}

std::string Name(int64_t i) { return absl::StrCat("layers.", i, ".weight"); }

// This group rank's side: each parameter's spec bound over the group, its shards allocated.
absl::StatusOr<Module> MakeSide(const Flags& f, const specs::Plan& plan, int group_rank,
                                int group_size) {
  Module module;
  const Shape shape = {Rows(f), kCols};
  for (int64_t i = 0; i < f.params; ++i) {
    std::optional<size_t> rule = specs::MatchRule(plan, Name(i));
    if (!rule) {
      SHARDKIT_ASSIGN_OR_RETURN(Tensor t, Tensor::Zeros(shape, DType::kFloat32));
      SHARDKIT_RETURN_IF_ERROR(module.AddParameter(Name(i), std::move(t)));
      continue;
    }
    SHARDKIT_ASSIGN_OR_RETURN(ShardedTensor st,
                              ShardedTensor::Zeros(shape, DType::kFloat32, plan.rules[*rule].spec,
                                                   group_size, group_rank));
    SHARDKIT_RETURN_IF_ERROR(module.AddParameter(Name(i), Tensor()));
    SHARDKIT_RETURN_IF_ERROR(module.SetSharded(Name(i), std::move(st)));
  }
  return module;
}

// Calls fn(param, tensor, row offset, col offset) for every local tensor of `module` (a
// replicated one only where `with_replicated`).
template <typename Fn>
void ForEachLocal(const Module& module, bool with_replicated, Fn fn) {
  for (size_t i = 0; i < module.names().size(); ++i) {
    const std::string& name = module.names()[i];
    if (!*module.IsSharded(name)) {
      if (with_replicated) fn(i, **module.GetTensor(name), 0, 0);
      continue;
    }
    const ShardedTensor& st = **module.GetSharded(name);
    for (const LocalShard& s : st.local_shards()) {
      fn(i, s.tensor, st.shards()[s.index].offsets[0], st.shards()[s.index].offsets[1]);
    }
  }
}

float* Floats(const Tensor& t) { return reinterpret_cast<float*>(t.data()); }

void Fill(const Module& module, int64_t step) {
  ForEachLocal(module, true, [&](size_t i, const Tensor& t, int64_t r0, int64_t c0) {
    float* p = Floats(t);
    for (int64_t r = 0; r < t.shape()[0]; ++r) {
      for (int64_t c = 0; c < t.shape()[1]; ++c) *p++ = Value(i, r0 + r, c0 + c, step);
    }
  });
}

// The first local value that differs from the step's, or OK.
absl::Status Check(const Module& module, int64_t step) {
  absl::Status status;
  ForEachLocal(module, true, [&](size_t i, const Tensor& t, int64_t r0, int64_t c0) {
    const float* p = Floats(t);
    for (int64_t r = 0; r < t.shape()[0] && status.ok(); ++r) {
      for (int64_t c = 0; c < t.shape()[1] && status.ok(); ++c, ++p) {
        if (*p != Value(i, r0 + r, c0 + c, step)) {
          status = absl::DataLossError(
              absl::StrCat(Name(i), "[", r0 + r, ", ", c0 + c, "] is ", *p, " after step ", step));
        }
      }
    }
  });
  return status;
}

// This rank's contribution to y = x·Wᵀ of every parameter, all of them back to back (rows each):
// its rows' sums on a trainer, its columns' partial sums on a server (replicated parameters by
// the first server only).
std::vector<double> PartialY(const Flags& f, const Module& module, bool with_replicated) {
  std::vector<double> y(f.params * Rows(f), 0.0);
  ForEachLocal(module, with_replicated, [&](size_t i, const Tensor& t, int64_t r0, int64_t c0) {
    const float* p = Floats(t);
    for (int64_t r = 0; r < t.shape()[0]; ++r) {
      double sum = 0;
      for (int64_t c = 0; c < t.shape()[1]; ++c) sum += double{*p++} * X(c0 + c);
      y[i * Rows(f) + r0 + r] += sum;
    }
  });
  return y;
}

// Rank M compares the trainers' y (their rows) with the sum of the servers' parts.
absl::Status CompareY(const Flags& f, const Module* trainer, const Module* server, int rank,
                      Communicator& comm) {
  const std::vector<double> mine = trainer != nullptr
                                       ? PartialY(f, *trainer, false)
                                       : PartialY(f, *server, rank == f.trainer_ranks);
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(ConstBuffer(mine)));
  if (rank != f.trainer_ranks) return absl::OkStatus();
  std::vector<double> want(mine.size(), 0.0), got(mine.size(), 0.0);
  for (size_t r = 0; r < all.size(); ++r) {
    const double* v = reinterpret_cast<const double*>(all[r].data());
    std::vector<double>& into = static_cast<int64_t>(r) < f.trainer_ranks ? want : got;
    for (size_t k = 0; k < mine.size(); ++k) into[k] += v[k];
  }
  for (size_t k = 0; k < want.size(); ++k) {
    if (std::abs(want[k] - got[k]) > 1e-5 * std::max(1.0, std::abs(want[k]))) {
      return absl::DataLossError(absl::StrCat("y of ", Name(k / Rows(f)), " row ", k % Rows(f),
                                              ": the servers compute ", got[k], ", the trainers ",
                                              want[k]));
    }
  }
  return absl::OkStatus();
}

// --server-plan bound to the model's parameters: idle rules are warnings (printed once, by the
// first server rank), a plan that shards nothing is refused unless --allow-replicated-only. Every
// rank reads the same file, so every rank reaches the same verdict before any collective.
absl::Status CheckServerPlan(const Flags& f, const specs::Plan& plan, int servers, bool first) {
  std::vector<specs::ParameterInfo> infos;
  for (int64_t i = 0; i < f.params; ++i) infos.push_back({Name(i), {Rows(f), kCols}});
  absl::StatusOr<std::vector<specs::ResolvedParameter>> resolved =
      specs::Resolve(plan, infos, servers);
  if (!resolved.ok()) return Annotate(resolved.status(), f.server_plan);
  if (const std::string nothing = specs::DescribeShardsNothing(*resolved);
      !nothing.empty() && !f.allow_replicated_only) {
    return absl::InvalidArgumentError(
        absl::StrCat(f.server_plan, ": ", nothing,
                     " of the model, so every server rank would receive every "
                     "parameter whole (--allow-replicated-only if that is what you want)"));
  }
  for (const specs::IdleRule& idle : specs::FindIdleRules(plan, *resolved)) {
    if (first) {
      std::cerr << "warning: " << f.server_plan << ": " << specs::DescribeIdleRule(plan, idle)
                << " of the model\n";
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<specs::Plan> ServerPlan(const Flags& f, int servers, bool first) {
  if (f.server_plan.empty()) {
    return specs::ParsePlan(R"({"rules": [{"match": "**", "spec": {"type": "chunk", "dim": 1,
        "placements": {"ranks": "all"}}}]})");
  }
  SHARDKIT_ASSIGN_OR_RETURN(std::string text, os::ReadWholeFile(f.server_plan));
  absl::StatusOr<specs::Plan> plan = specs::ParsePlan(text);
  if (!plan.ok()) return Annotate(plan.status(), f.server_plan);
  SHARDKIT_RETURN_IF_ERROR(CheckServerPlan(f, *plan, servers, first));
  return plan;
}

absl::Status Run(const Flags& f, Communicator& comm) {
  const int rank = comm.rank(), world = comm.world_size();
  if (f.trainer_ranks < 1 || f.trainer_ranks >= world) {
    return absl::InvalidArgumentError(
        absl::StrCat("--trainer-ranks must be in [1, ", world - 1, "] for a world of ", world));
  }
  const int trainers = static_cast<int>(f.trainer_ranks), servers = world - trainers;
  SyncGroups groups;
  for (int r = 0; r < world; ++r) (r < trainers ? groups.source : groups.destination).push_back(r);
  SHARDKIT_ASSIGN_OR_RETURN(specs::Plan trainer_plan, specs::ParsePlan(R"({"rules": [{"match":
      "**", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]})"));
  // The same verdict on every rank even where ranks were given other files or flags.
  absl::StatusOr<specs::Plan> server_plan = ServerPlan(f, servers, rank == trainers);
  SHARDKIT_RETURN_IF_ERROR(
      AgreeOnStatus(comm, server_plan.status(), "checking --server-plan", CallOptions{}));
  std::optional<Module> trainer, server;
  if (rank < trainers) {
    SHARDKIT_ASSIGN_OR_RETURN(trainer, MakeSide(f, trainer_plan, rank, trainers));
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(server, MakeSide(f, *server_plan, rank - trainers, servers));
  }
  const Module* src = trainer ? &*trainer : nullptr;
  Module* dst = server ? &*server : nullptr;
  SHARDKIT_ASSIGN_OR_RETURN(SyncPlan plan, PlanSync(src, dst, groups, comm));
  const double mib = static_cast<double>(f.params * Rows(f) * kCols * 4) / (1 << 20);
  for (int64_t step = 1, push = 0; step <= f.steps; ++step) {
    if (trainer) Fill(*trainer, step);  // the training step
    if (step % f.push_every != 0) continue;
    const absl::Time start = absl::Now();
    SHARDKIT_RETURN_IF_ERROR(Sync(plan, src, dst, comm, {.verify = true}));
    const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
    absl::Status checked = server ? Check(*server, step) : absl::OkStatus();
    SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, checked, absl::StrCat("push ", push + 1)));
    SHARDKIT_RETURN_IF_ERROR(CompareY(f, src, dst, rank, comm));
    if (rank == trainers) {
      std::cout << absl::StrFormat("push %d: %d parameters, %.2f MiB, %.3f s, verified\n", ++push,
                                   f.params, mib, seconds)
                << std::flush;
    } else {
      ++push;
    }
  }
  return absl::OkStatus();
}

int Main(const std::vector<std::string>& args) {
  Flags f;
  flags::FlagParser parser(kCommand,
                           "--trainer-ranks M [--steps S] [--push-every K] [--mib B] [--params P] "
                           "[--server-plan PLAN.json [--allow-replicated-only]]");
  parser.AddInt("trainer-ranks", &f.trainer_ranks, "ranks 0..M-1 train, the rest serve (required)",
                1, 1 << 20);
  parser.AddInt("steps", &f.steps, "training steps (default 4)", 0, int64_t{1} << 30);
  parser.AddInt("push-every", &f.push_every, "push every K steps (default 2)", 1, int64_t{1} << 30);
  parser.AddInt("mib", &f.mib, "MiB of parameters in all (default 8)", 1, int64_t{1} << 20);
  parser.AddInt("params", &f.params, "number of parameters (default 4)", 1, 1 << 20);
  parser.AddString("server-plan", &f.server_plan,
                   "the servers' layout: a plan whose rules are bound over the server group "
                   "(default: chunk dim 1 over every server)");
  parser.AddBool("allow-replicated-only", &f.allow_replicated_only,
                 "accept a --server-plan that shards nothing (every server rank receives every "
                 "parameter whole); by default it is refused");
  const flags::ParseResult parsed = ParseCommand(parser, args, flags::Positionals::None());
  if (parsed.done()) return parsed.exit_code();
  if (absl::Status s = flags::Require(parser, {"trainer-ranks"}, flags::kSeeHelp); !s.ok()) {
    flags::ReportError(kCommand, s);
    return 2;
  }
  absl::StatusOr<std::unique_ptr<Communicator>> comm = ConnectFromEnv();
  if (!comm.ok()) return flags::ReportError(kCommand, comm.status());
  absl::Status status = Run(f, **comm);
  return status.ok() ? 0 : flags::ReportError(kCommand, status);
}

}  // namespace
}  // namespace shardkit::weight_sync

int main(int argc, char** argv) {
  std::signal(SIGPIPE, SIG_IGN);  // a peer that died must give EPIPE, not kill this rank
  return shardkit::weight_sync::Main(std::vector<std::string>(argv + 1, argv + argc));
}
