#include "integration/checkpoint/source/checkpoint_identity.h"

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/json/json_reader.h"

namespace shardkit::checkpoint {
namespace {

using json::Json;

constexpr size_t kMostListed = 8;  // ranks named in one message; the rest are counted

// What one rank saw: the path it opened, and its files or why it could not open them.
struct Seen {
  std::string path;
  std::string error;  // empty: opened
  std::vector<CheckpointFile> files;
};

std::string Encode(const absl::StatusOr<const TensorSource*>& mine, std::string_view path) {
  Json out = {{"path", std::string(path)}};
  if (!mine.ok()) {
    out["error"] = std::string(mine.status().message());
    return out.dump();
  }
  Json files = Json::array();
  for (const CheckpointFile& file : (*mine)->identity()) {
    files.push_back({file.name, file.size, file.digest, file.whole});
  }
  out["files"] = std::move(files);
  return out.dump();
}

// Every rank decodes the same bytes the same way; a message that does not parse (not sent by
// this code) is that rank's error.
Seen Decode(const std::string& bytes) {
  Seen seen;
  absl::StatusOr<Json> parsed = json::ParseJson(bytes);
  if (!parsed.ok() || !parsed->is_object() || !(*parsed)["path"].is_string()) {
    seen.error = "sent an unreadable description of its files";
    return seen;
  }
  const Json& in = *parsed;
  seen.path = in["path"].get<std::string>();
  if (in.contains("error")) {
    seen.error = in["error"].is_string() ? in["error"].get<std::string>() : "unknown error";
    return seen;
  }
  for (const Json& file : in.value("files", Json::array())) {
    if (!file.is_array() || file.size() != 4 || !file[0].is_string() ||
        !file[1].is_number_unsigned() || !file[2].is_string() || !file[3].is_boolean()) {
      seen.error = "sent an unreadable description of its files";
      return seen;
    }
    seen.files.push_back({file[0].get<std::string>(), file[1].get<uint64_t>(),
                          file[2].get<std::string>(), file[3].get<bool>()});
  }
  return seen;
}

std::string Describe(const CheckpointFile& file) {
  return absl::StrCat(file.size, " bytes, ", file.whole ? "" : "header ", file.digest);
}

// How rank `r`'s files differ from the source's, or "" if they do not: the first file that
// differs, and how many more do.
std::string Difference(const Seen& source, const Seen& other, int src_rank, int rank,
                       std::string_view what) {
  std::map<std::string, const CheckpointFile*> theirs;
  for (const CheckpointFile& file : other.files) theirs[file.name] = &file;
  std::vector<std::string> differences;
  for (const CheckpointFile& file : source.files) {
    auto it = theirs.find(file.name);
    if (it == theirs.end()) {
      differences.push_back(absl::StrCat(file.name, ": rank ", rank, " has no such file"));
      continue;
    }
    const CheckpointFile& seen = *it->second;
    theirs.erase(it);
    if (seen.size == file.size && seen.digest == file.digest) continue;
    differences.push_back(absl::StrCat(file.name, ": ", Describe(seen), " on rank ", rank, ", ",
                                       Describe(file), " on rank ", src_rank));
  }
  for (const auto& [name, file] : theirs) {
    differences.push_back(absl::StrCat(name, ": only rank ", rank, " has it"));
  }
  if (differences.empty()) return "";
  std::string out =
      absl::StrCat("rank ", rank, " (", other.path, ") sees another ", std::string(what),
                   " than rank ", src_rank, ", the source (", source.path, "): ", differences[0]);
  if (differences.size() > 1) {
    absl::StrAppend(&out, " (and ", differences.size() - 1, " more files differ)");
  }
  return out;
}

absl::Status Verdict(const std::vector<Seen>& seen, int src_rank, std::string_view what) {
  std::vector<std::string> problems;
  for (size_t r = 0; r < seen.size(); ++r) {
    if (!seen[r].error.empty()) {
      problems.push_back(absl::StrCat("rank ", r, " cannot open the ", std::string(what), " (",
                                      seen[r].path, "): ", seen[r].error));
    }
  }
  const Seen& source = seen[static_cast<size_t>(src_rank)];
  for (size_t r = 0; r < seen.size() && source.error.empty(); ++r) {
    if (!seen[r].error.empty() || static_cast<int>(r) == src_rank) continue;
    std::string difference = Difference(source, seen[r], src_rank, static_cast<int>(r), what);
    if (!difference.empty()) problems.push_back(std::move(difference));
  }
  if (problems.empty()) return absl::OkStatus();
  const size_t more = problems.size() > kMostListed ? problems.size() - kMostListed : 0;
  problems.resize(problems.size() - more);
  std::string message = absl::StrCat("checking that every rank sees the same ", std::string(what),
                                     ": ", absl::StrJoin(problems, "; "));
  if (more > 0) absl::StrAppend(&message, "; and ", more, " more ranks");
  return absl::InvalidArgumentError(message);
}

}  // namespace

absl::Status AgreeOnCheckpoint(Communicator& comm, const absl::StatusOr<const TensorSource*>& mine,
                               std::string_view path, int src_rank, const CallOptions& call,
                               std::string_view what) {
  const std::string encoded = Encode(mine, path);
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all,
                            comm.AllGather(ConstBuffer(encoded), call));
  std::vector<Seen> seen;
  seen.reserve(all.size());
  for (const std::string& bytes : all) seen.push_back(Decode(bytes));
  // A DCP checkpoint (DcpSource: its metadata first) is named as one, from the source's list:
  // the same words on every rank.
  const Seen& source = seen[static_cast<size_t>(src_rank)];
  const bool dcp = !source.files.empty() && absl::EndsWith(source.files[0].name, "metadata");
  return Verdict(seen, src_rank, dcp ? "DCP checkpoint" : what);
}

}  // namespace shardkit::checkpoint
