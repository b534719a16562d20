#include "integration/formats/hf/hf_output.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/os/files.h"
#include "nlohmann/json.hpp"

namespace shardkit::hf {
namespace {

namespace fs = std::filesystem;

bool AllDigits(absl::string_view text) {
  return !text.empty() &&
         std::all_of(text.begin(), text.end(), [](char c) { return absl::ascii_isdigit(c); });
}

// A temporary name of a file GatherHuggingFace writes, with its pid.
std::optional<os::TemporaryName> OwnTemporary(std::string_view name) {
  std::optional<os::TemporaryName> temp = os::ParseTemporaryName(name);
  if (temp && IsHfOutputName(temp->base)) return temp;
  return std::nullopt;
}

// Refuses a `dir` holding anything but the lock file, the files a model folder holds beside its
// weights (IsModelFolderFile) (and, with `allow_dead_temporaries`,
// temporary files of a Hugging Face output whose process is gone: RemoveDeadTemporaries removes
// them under the lock), naming the first few entries — or, first, a temporary file of a running
// process.
absl::Status CheckEmpty(const std::string& dir, bool allow_dead_temporaries) {
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::optional<os::TemporaryName> temp = OwnTemporary(name);
    const bool gone = temp && os::ProcessGone(temp->pid);
    if (name == os::kLockFileName || IsModelFolderFile(name) || (gone && allow_dead_temporaries)) {
      continue;
    }
    if (temp && !gone) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": holds ", name, ", a temporary file of process ", temp->pid,
          ", which is running on this host: left alone (remove it yourself if no shardkit gather "
          "is writing ",
          dir, ")"));
    }
    names.push_back(name);
  }
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat(dir, ": cannot list the directory: ", ec.message()));
  }
  if (names.empty()) return absl::OkStatus();
  std::sort(names.begin(), names.end());
  return absl::InvalidArgumentError(
      absl::StrCat(dir, ": is not empty (holds ", JoinFirst(names, 3),
                   "): a Hugging Face checkpoint is written into a new or empty directory, or one "
                   "holding only a model's other files (config.json, generation_config.json, "
                   "tokenizer files), which are left alone"));
}

}  // namespace

FileAssignment AssignFiles(const std::vector<int64_t>& tensor_bytes, int64_t max_file_bytes) {
  FileAssignment out;
  out.file_of.reserve(tensor_bytes.size());
  std::optional<size_t> current;  // the file open for tensors that fit
  int64_t used = 0;               // its bytes so far
  for (const int64_t bytes : tensor_bytes) {
    if (bytes > max_file_bytes) {  // alone; `current` stays open
      out.file_of.push_back(out.files++);
      continue;
    }
    if (!current || bytes > max_file_bytes - used) {
      current = out.files++;
      used = 0;
    }
    out.file_of.push_back(*current);
    used += bytes;
  }
  return out;
}

std::vector<std::string> HfFileNames(size_t files) {
  if (files <= 1) return {kHfSingleFileName};
  std::vector<std::string> names;
  for (size_t k = 1; k <= files; ++k) {
    names.push_back(absl::StrFormat("model-%05d-of-%05d.safetensors", k, files));
  }
  return names;
}

bool IsNumberedPartName(std::string_view file_name, int64_t* files) {
  absl::string_view name(file_name.data(), file_name.size());
  if (!absl::ConsumeSuffix(&name, ".safetensors")) return false;
  const size_t of = name.rfind("-of-");
  if (of == absl::string_view::npos) return false;
  const absl::string_view total = name.substr(of + 4), head = name.substr(0, of);
  const size_t dash = head.rfind('-');
  if (dash == absl::string_view::npos || !AllDigits(head.substr(dash + 1))) return false;
  int64_t n = 0;
  if (!AllDigits(total) || !absl::SimpleAtoi(total, &n) || n < 2) return false;
  *files = n;
  return true;
}

std::string HfIndexJson(int64_t total_size, const std::map<std::string, std::string>& weight_map) {
  const nlohmann::json index = {{"metadata", {{"total_size", total_size}}},
                                {"weight_map", weight_map}};
  return index.dump(2) + "\n";
}

bool IsModelFolderFile(std::string_view file_name) {
  static constexpr std::string_view kNames[] = {"config.json",
                                                "generation_config.json",
                                                "tokenizer.json",
                                                "tokenizer_config.json",
                                                "tokenizer.model",
                                                "special_tokens_map.json",
                                                "added_tokens.json",
                                                "vocab.json",
                                                "vocab.txt",
                                                "merges.txt",
                                                "chat_template.json",
                                                "chat_template.jinja",
                                                "preprocessor_config.json",
                                                "processor_config.json",
                                                "README.md"};
  if (std::find(std::begin(kNames), std::end(kNames), file_name) != std::end(kNames)) return true;
  // A model's own code (trust_remote_code): configuration_*.py, modeling_*.py, tokenization_*.py.
  const absl::string_view name(file_name.data(), file_name.size());
  return absl::EndsWith(name, ".py") &&
         (absl::StartsWith(name, "configuration_") || absl::StartsWith(name, "modeling_") ||
          absl::StartsWith(name, "tokenization_"));
}

bool IsHfOutputName(std::string_view name) {
  int64_t files = 0;
  return name == kHfSingleFileName || name == kHfIndexFileName ||
         (absl::StartsWith(absl::string_view(name.data(), name.size()), "model-") &&
          IsNumberedPartName(name, &files));
}

absl::StatusOr<os::DirectoryLock> LockEmptyDirectory(const std::string& dir,
                                                     os::CreatedDirectories* created) {
  os::CreatedDirectories kept;  // when the caller does not ask: the directories are kept
  if (created == nullptr) created = &kept;
  SHARDKIT_ASSIGN_OR_RETURN(*created, os::CreatedDirectories::Make(dir));
  // A lock file there may be another gather's, writing now: then that is what to say, rather than
  // naming its temporary files. (Without one, the lock is taken once the directory passed.)
  std::optional<os::DirectoryLock> held;
  std::error_code ec;
  if (fs::exists(fs::path(dir) / os::kLockFileName, ec)) {
    SHARDKIT_ASSIGN_OR_RETURN(held, os::DirectoryLock::Acquire(dir));
  }
  SHARDKIT_RETURN_IF_ERROR(CheckEmpty(dir, /*allow_dead_temporaries=*/true));
  if (!held) {
    SHARDKIT_ASSIGN_OR_RETURN(held, os::DirectoryLock::Acquire(dir));
  }
  os::DirectoryLock lock = *std::move(held);
  created->AddOwnFile(lock.path());
  // Under the lock, no other gather writes here: a temporary file whose process is gone is
  // debris, even one another host's gather left on a shared file system.
  absl::Status status = os::RemoveDeadTemporaries(dir, IsHfOutputName).status();
  if (status.ok()) status = CheckEmpty(dir, /*allow_dead_temporaries=*/false);
  if (!status.ok()) {
    created->RemoveIfEmpty();  // while the lock is held
    return status;
  }
  return lock;
}

}  // namespace shardkit::hf
