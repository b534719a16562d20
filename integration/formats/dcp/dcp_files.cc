#include "integration/formats/dcp/dcp_files.h"

#include <algorithm>
#include <filesystem>
#include <system_error>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"

namespace shardkit::dcp {
namespace {

namespace fs = std::filesystem;

// A non-empty run of ASCII digits, as a number (-1 if not one, or too large).
int64_t Digits(std::string_view text) {
  int64_t value = -1;
  if (text.empty() ||
      !std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
      !absl::SimpleAtoi(absl::string_view(text.data(), text.size()), &value)) {
    return -1;
  }
  return value;
}

// Whether `name` is "__" + middle + `suffix`; then `middle` is set.
bool Strip(std::string_view name, std::string_view suffix, std::string_view* middle) {
  if (name.size() < 2 + suffix.size() || name.substr(0, 2) != "__" ||
      name.substr(name.size() - suffix.size()) != suffix) {
    return false;
  }
  *middle = name.substr(2, name.size() - 2 - suffix.size());
  return true;
}

}  // namespace

std::string DistcpFileName(int64_t rank) { return absl::StrCat("__", rank, "_0.distcp"); }

int64_t DcpFileRank(std::string_view name) {
  std::string_view middle;
  if (!Strip(name, ".distcp", &middle)) return -1;
  const size_t underscore = middle.find('_');
  if (underscore == std::string_view::npos || Digits(middle.substr(underscore + 1)) < 0) {
    return -1;
  }
  return Digits(middle.substr(0, underscore));
}

bool IsDcpFileName(std::string_view name) {
  std::string_view middle;
  if (name == kMetadataFileName) return true;
  if (Strip(name, ".metadata", &middle)) return Digits(middle) >= 0;
  return DcpFileRank(name) >= 0;
}

std::string UnfinishedSave(const std::string& dir) {
  std::vector<std::string> data;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (DcpFileRank(name) >= 0) data.push_back(name);
  }
  if (data.empty()) return "";
  std::sort(data.begin(), data.end());
  return absl::StrCat(
      dir, ": a PyTorch DCP checkpoint folder without its metadata (.metadata): it holds ",
      JoinFirst(data, 1),
      " but no .metadata, which torch writes last — an unfinished save (or one still being "
      "written)");
}

}  // namespace shardkit::dcp
