#include "core/store/rendezvous.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace shardkit {

absl::Status AwaitMembers(Store& store, const std::string& prefix, int rank, int size,
                          absl::Time deadline) {
  auto key = [&](int r) { return absl::StrCat(prefix, "/joined/", r); };
  // Constant store traffic per rank: the last of `size` to join (the counter says which) opens
  // the gate every rank waits on. The per-rank keys are only read when naming absent ranks.
  const std::string gate = absl::StrCat(prefix, "/joined/all");
  SHARDKIT_RETURN_IF_ERROR(store.Set(key(rank), "1"));
  SHARDKIT_ASSIGN_OR_RETURN(int64_t joined, store.Add(absl::StrCat(prefix, "/joined/count"), 1));
  if (joined == size) SHARDKIT_RETURN_IF_ERROR(store.Set(gate, "1"));
  absl::Status waited = store.Wait({gate}, deadline - absl::Now());
  if (waited.ok() || waited.code() != absl::StatusCode::kDeadlineExceeded) return waited;
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    absl::StatusOr<bool> present = store.Check({key(r)});
    if (present.ok() && !*present) missing.push_back(r);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous of ", size, " ranks timed out: rank", missing.size() == 1 ? " " : "s ",
      absl::StrJoin(missing, ", "), " never joined (store keys under \"", prefix, "\")"));
}

}  // namespace shardkit
