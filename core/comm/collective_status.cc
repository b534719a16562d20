#include "core/comm/collective_status.h"

#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"

namespace shardkit {
namespace {

constexpr size_t kMaxMessage = 2048;

std::string Encode(const absl::Status& status) {
  if (status.ok()) return std::string();
  const int32_t code = static_cast<int32_t>(status.code());
  std::string out(sizeof(code), '\0');
  std::memcpy(out.data(), &code, sizeof(code));
  std::string_view message(status.message().data(), status.message().size());
  out.append(message.substr(0, kMaxMessage));
  return out;
}

}  // namespace

absl::Status AgreeOnStatus(Communicator& comm, const absl::Status& local, std::string_view context,
                           const CallOptions& options) {
  const std::string mine = Encode(local);
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            comm.AllGather(ConstBuffer(mine), options));
  absl::StatusCode code = absl::StatusCode::kOk;
  std::vector<std::pair<int, std::string_view>> failures;  // (rank, message), ascending
  for (size_t rank = 0; rank < all.size(); ++rank) {
    const std::string& entry = all[rank];
    if (entry.size() < sizeof(int32_t)) continue;  // OK on that rank
    int32_t raw = 0;
    std::memcpy(&raw, entry.data(), sizeof(raw));
    if (code == absl::StatusCode::kOk) code = static_cast<absl::StatusCode>(raw);
    failures.emplace_back(static_cast<int>(rank), std::string_view(entry).substr(sizeof(int32_t)));
  }
  if (code == absl::StatusCode::kOk) return absl::OkStatus();
  return absl::Status(code, absl::StrCat(absl::string_view(context.data(), context.size()), ": ",
                                         GroupByMessage(failures)));
}

}  // namespace shardkit
