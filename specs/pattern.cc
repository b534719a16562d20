#include "specs/pattern.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace shardkit::specs {
namespace {

constexpr std::string_view kAnySegments = "**";

std::vector<std::string_view> Segments(std::string_view text) {
  std::vector<std::string_view> out;
  for (absl::string_view piece : absl::StrSplit(absl::string_view(text.data(), text.size()), '.')) {
    out.emplace_back(piece.data(), piece.size());
  }
  return out;
}

// Glob within one segment: '*' matches any run of characters. Greedy with backtracking to the
// last star, which is exact for a single wildcard kind.
bool MatchSegment(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0;
  size_t star = std::string_view::npos, star_t = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      star_t = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++star_t;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

}  // namespace

absl::Status ValidatePattern(std::string_view pattern) {
  if (pattern.empty()) return absl::InvalidArgumentError("pattern must not be empty");
  for (std::string_view segment : Segments(pattern)) {
    if (segment != kAnySegments && segment.find(kAnySegments) != std::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("\"**\" must be a whole dotted segment, found segment \"",
                       absl::string_view(segment.data(), segment.size()), "\""));
    }
  }
  return absl::OkStatus();
}

bool MatchesPattern(std::string_view pattern, std::string_view name) {
  const std::vector<std::string_view> pat = Segments(pattern);
  const std::vector<std::string_view> seg = Segments(name);
  const size_t np = pat.size(), ns = seg.size();
  // matched[i][j]: pat[i..] matches seg[j..]. Filled from the end.
  std::vector<std::vector<char>> matched(np + 1, std::vector<char>(ns + 1, 0));
  matched[np][ns] = 1;
  for (size_t i = np; i-- > 0;) {
    for (size_t j = ns + 1; j-- > 0;) {
      if (pat[i] == kAnySegments) {
        matched[i][j] = matched[i + 1][j] || (j < ns && matched[i][j + 1]);
      } else {
        matched[i][j] = j < ns && matched[i + 1][j + 1] && MatchSegment(pat[i], seg[j]);
      }
    }
  }
  return matched[0][0] != 0;
}

}  // namespace shardkit::specs
