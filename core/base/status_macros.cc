#include "core/base/status_macros.h"

#include "absl/strings/str_cat.h"

namespace shardkit {

absl::Status Annotate(const absl::Status& status, std::string_view context) {
  if (status.ok()) return status;
  absl::Status annotated(
      status.code(),
      absl::StrCat(absl::string_view(context.data(), context.size()), ": ", status.message()));
  status.ForEachPayload([&annotated](absl::string_view url, const absl::Cord& payload) {
    annotated.SetPayload(url, payload);
  });
  return annotated;
}

}  // namespace shardkit
