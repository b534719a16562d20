// Sync: one plan, many calls, each run by the box mover's executor (internal/box_mover.h) with
// the state the plan keeps; then the report and, if asked, verify.
#include "core/engine/sync.h"

#include <utility>
#include <vector>

#include "core/comm/culprit.h"
#include "core/engine/internal/box_mover.h"
#include "core/engine/internal/sync_layout.h"
#include "core/engine/internal/sync_verify.h"

namespace shardkit {
namespace {

void ReportUpdated(const SyncPlan& plan, const Module* destination,
                   const std::vector<int64_t>& done, SyncReport& report) {
  report.updated.clear();
  if (destination == nullptr) return;
  const std::vector<int64_t>& expected = internal::SyncPlanAccess::receives_per_parameter(plan);
  for (size_t i = 0; i < plan.names().size(); ++i) {
    if (done[i] == expected[i]) report.updated.push_back(plan.names()[i]);
  }
}

}  // namespace

absl::Status Sync(SyncPlan& plan, const Module* source, Module* destination, Communicator& comm,
                  const SyncCallOptions& options, SyncReport* report_out) {
  CallOptions call = options.call;
  call.deadline = comm.Deadline(call);
  SyncReport report;
  std::vector<int64_t> done(plan.names().size(), 0);
  internal::MoverState& state = internal::KeptState(plan);
  absl::Status status = internal::BoxMover(plan, state, source, destination, comm, "Sync")
                            .Run(options, call, report, done);
  ReportUpdated(plan, destination, done, report);
  if (status.ok() && options.after_move_for_test) options.after_move_for_test();
  if (status.ok() && options.verify) {
    status = internal::VerifySync(plan, state, source, destination, comm, call);
  }
  if (report_out != nullptr) *report_out = std::move(report);
  // A rank that died or stalled: the same first line on every rank, naming it.
  return LeadWithCulprit(status, "Sync");
}

}  // namespace shardkit
