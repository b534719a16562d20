#include "core/base/status_macros.h"

#include "absl/strings/str_cat.h"

namespace shardkit {

absl::Status WithMessage(const absl::Status& status, std::string_view message) {
  if (status.ok()) return status;
  absl::Status rewritten(status.code(), absl::string_view(message.data(), message.size()));
  status.ForEachPayload([&rewritten](absl::string_view url, const absl::Cord& payload) {
    rewritten.SetPayload(url, payload);
  });
  return rewritten;
}

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  return WithMessage(status, absl::StrCat(absl::string_view(context.data(), context.size()), ": ",
                                          status.message()));
}

}  // namespace shardkit
