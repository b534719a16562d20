#include "integration/launch/line_prefixer.h"

#include "absl/strings/str_cat.h"

namespace shardkit::launch {

std::string RankLinePrefix(int rank) { return absl::StrCat("[rank ", rank, "] "); }

void LinePrefixer::Emit(std::string_view text, std::string* out) {
  if (!mid_line_) out->append(prefix_);
  out->append(text);
  mid_line_ = text.empty() || text.back() != '\n';
}

std::string LinePrefixer::Feed(std::string_view data) {
  pending_.append(data);
  std::string out;
  size_t start = 0;
  for (size_t newline; (newline = pending_.find('\n', start)) != std::string::npos;
       start = newline + 1) {
    Emit(std::string_view(pending_).substr(start, newline + 1 - start), &out);
  }
  pending_.erase(0, start);
  if (pending_.size() > kMaxPending) {
    Emit(pending_, &out);
    pending_.clear();
  }
  return out;
}

std::string LinePrefixer::Flush() {
  std::string out;
  if (!pending_.empty()) {
    Emit(pending_ + "\n", &out);
    pending_.clear();
  } else if (mid_line_) {
    Emit("\n", &out);
  }
  return out;
}

}  // namespace shardkit::launch
