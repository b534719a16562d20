#include "core/store/rendezvous.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"

namespace shardkit {

absl::Status AwaitMembers(Store& store, const std::string& prefix, int rank, int size,
                          absl::Time deadline) {
  auto key = [&](int r) { return absl::StrCat(prefix, "/joined/", r); };
  SHARDKIT_RETURN_IF_ERROR(store.Set(key(rank), "1"));
  std::vector<std::string> keys;
  for (int r = 0; r < size; ++r) keys.push_back(key(r));
  absl::Status waited = store.Wait(keys, deadline - absl::Now());
  if (waited.ok() || waited.code() != absl::StatusCode::kDeadlineExceeded) return waited;
  std::vector<int> missing;
  for (int r = 0; r < size; ++r) {
    absl::StatusOr<bool> present = store.Check({keys[r]});
    if (present.ok() && !*present) missing.push_back(r);
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "rendezvous of ", size, " ranks timed out: rank", missing.size() == 1 ? " " : "s ",
      absl::StrJoin(missing, ", "), " never joined (store keys under \"", prefix, "\")"));
}

}  // namespace shardkit
