#include "integration/formats/shard_dir/output_directory.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <filesystem>
#include <random>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "core/base/status_macros.h"
#include "core/os/fd.h"
#include "core/os/swap_dir.h"
#include "integration/formats/dcp/dcp_files.h"

namespace shardkit::checkpoint {
namespace {

namespace fs = std::filesystem;

constexpr char kNewInfix[] = ".shardkit-new-";
constexpr char kMarkerText[] = "{\"format\": \"dcp\", \"written_by\": \"shardkit\", \"version\": 1}\n";
constexpr size_t kIndexHeadBytes = 4096;

// A file an output (of either format) or an interrupted run of one may leave, by its own name.
bool IsOutputFile(std::string_view name) {
  return name == kIndexFileName || name == kDcpMarkerName || RankOfFileName(name) >= 0 ||
         dcp::IsDcpFileName(name);
}

// An output file, or a temporary name of one (os::AtomicFile's).
bool IsOutputEntry(std::string_view name) {
  const std::optional<os::TemporaryName> temp = os::ParseTemporaryName(name);
  return IsOutputFile(temp ? temp->base : name);
}

absl::Status ListError(const std::string& dir, const std::error_code& ec) {
  return absl::InvalidArgumentError(
      absl::StrCat(dir, ": cannot list the output directory: ", ec.message()));
}

// Whether the JSON text begins with {"format": "shardkit-shards" (whitespace allowed).
bool BeginsAsShardIndex(std::string_view text) {
  size_t at = 0;
  const auto skip = [&] {
    while (at < text.size() && absl::ascii_isspace(static_cast<unsigned char>(text[at]))) ++at;
  };
  const auto take = [&](std::string_view token) {
    skip();
    if (text.substr(at, token.size()) != token) return false;
    at += token.size();
    return true;
  };
  return take("{") && take("\"format\"") && take(":") && take(absl::StrCat("\"", kIndexFormat, "\""));
}

absl::Status CheckIndexIsOurs(const std::string& dir) {
  const std::string path = (fs::path(dir) / kIndexFileName).string();
  std::string head(kIndexHeadBytes, '\0');
  const os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  ssize_t n = fd.valid() ? ::pread(fd.get(), head.data(), head.size(), 0) : -1;
  if (n < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot read: ", os::ErrnoText(errno)));
  }
  head.resize(static_cast<size_t>(n));
  if (BeginsAsShardIndex(head)) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      dir, ": holds an index.json that is not a shardkit shard index (it does not begin with "
           "{\"format\": \"shardkit-shards\"}): shardkit replaces only its own output; use a new "
           "or empty directory"));
}

absl::Status ForeignDcp(const std::string& dir, std::vector<std::string> files, bool metadata) {
  std::sort(files.begin(), files.end());
  const size_t shown = std::min<size_t>(files.size(), 4);
  const std::string list =
      absl::StrCat(absl::StrJoin(files.begin(), files.begin() + static_cast<ptrdiff_t>(shown), ", "),
                   files.size() > shown ? absl::StrCat(" and ", files.size() - shown, " more") : "");
  return absl::InvalidArgumentError(absl::StrCat(
      dir, ": holds ",
      metadata ? "a PyTorch DCP checkpoint" : "the files of an unfinished PyTorch DCP save",
      " that shardkit did not write (", list, "; no ", kDcpMarkerName,
      "): shardkit replaces only its own output; use a new or empty directory"));
}

// 16 random hex digits: the new directory's name, unique per run.
std::string RandomSuffix() {
  std::random_device random;
  return absl::StrFormat("%08x%08x", random(), random());
}

// Whether `name` is a directory a run into `base` writes beside it: .BASE.shardkit-new-HEX.
bool IsNewDirectoryOf(const std::string& name, const std::string& base) {
  const std::string prefix = absl::StrCat(".", base, kNewInfix);
  if (!absl::StartsWith(name, prefix) || name.size() != prefix.size() + 16) return false;
  return std::all_of(name.begin() + static_cast<ptrdiff_t>(prefix.size()), name.end(),
                     [](char c) { return absl::ascii_isxdigit(static_cast<unsigned char>(c)); });
}

// What killed runs into `real` left beside it (the caller holds its lock). Best effort.
void RemoveNewDirectoriesOf(const fs::path& real) {
  std::error_code ec;
  const std::string base = real.filename().string();
  for (fs::directory_iterator it(real.parent_path(), ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsNewDirectoryOf(name, base) && it->is_directory(ec)) os::RemoveTree(it->path().string());
  }
}

// Removes DIR's output files but a running process's temporaries (named in `left_alone`; the lock
// stays), the marker last: while any output file is left, it says whose they are.
absl::Status RemoveOutputFiles(const std::string& dir, std::vector<std::string>* left_alone) {
  SHARDKIT_RETURN_IF_ERROR(os::RemoveDeadTemporaries(dir, IsOutputFile, left_alone).status());
  std::error_code ec;
  std::vector<fs::path> files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (IsOutputFile(name) && name != kDcpMarkerName) files.push_back(it->path());
  }
  if (ec) return ListError(dir, ec);
  files.push_back(fs::path(dir) / kDcpMarkerName);
  for (const fs::path& path : files) {
    if (!fs::remove(path, ec) && ec) {
      return absl::InvalidArgumentError(absl::StrCat(path.string(), ": cannot remove: ",
                                                     ec.message()));
    }
  }
  return os::SyncDirectory(dir);
}

}  // namespace

absl::StatusOr<OutputContents> ExamineOutputDir(const std::string& dir) {
  OutputContents contents;
  std::error_code ec;
  if (fs::status(dir, ec).type() == fs::file_type::not_found) return contents;
  bool index = false, marker = false, metadata = false;
  std::vector<std::string> dcp_files;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    if (name == os::kLockFileName) continue;
    if (!IsOutputEntry(name)) {
      return absl::InvalidArgumentError(absl::StrCat(
          dir, ": holds \"", name,
          "\", which is not shardkit output (shardkit replaces only its own output: use a new or "
          "empty directory, or one holding only an earlier shardkit output)"));
    }
    contents.any = true;
    if (os::ParseTemporaryName(name)) continue;
    index = index || name == kIndexFileName;
    marker = marker || name == kDcpMarkerName;
    if (dcp::IsDcpFileName(name)) {
      dcp_files.push_back(name);
      metadata = metadata || absl::EndsWith(name, ".metadata");
    }
  }
  if (ec) return ListError(dir, ec);
  if (!dcp_files.empty() && !marker) return ForeignDcp(dir, std::move(dcp_files), metadata);
  if (index) SHARDKIT_RETURN_IF_ERROR(CheckIndexIsOurs(dir));
  contents.complete = index || (metadata && marker);
  return contents;
}

absl::StatusOr<OutputDirectory> OutputDirectory::Prepare(const std::string& dir,
                                                         OutputFormat format, bool owner) {
  OutputDirectory out;
  out.dir_ = dir;
  out.write_dir_ = dir;
  out.format_ = format;
  out.owner_ = owner;
  if (owner) {
    SHARDKIT_ASSIGN_OR_RETURN(out.created_, os::CreatedDirectories::Make(dir));
  }
  absl::StatusOr<OutputContents> contents = ExamineOutputDir(dir);
  if (!contents.ok()) {
    out.created_.RemoveIfEmpty();
    return contents.status();
  }
  out.contents_ = *contents;
  return out;
}

std::string OutputDirectory::LastFileName() const {
  return format_ == OutputFormat::kDcp ? dcp::kMetadataFileName : kIndexFileName;
}

absl::Status OutputDirectory::Begin() {
  SHARDKIT_ASSIGN_OR_RETURN(lock_, os::DirectoryLock::Acquire(dir_));
  created_.AddOwnFile(lock_->path());  // removed with DIR, if this run created DIR
  SHARDKIT_ASSIGN_OR_RETURN(contents_, ExamineOutputDir(dir_));  // again, under the lock
  std::error_code ec;
  real_ = fs::canonical(dir_, ec).string();
  if (ec) {
    return absl::InvalidArgumentError(absl::StrCat(dir_, ": cannot resolve: ", ec.message()));
  }
  if (real_ != "/") RemoveNewDirectoriesOf(real_);
  SHARDKIT_RETURN_IF_ERROR(contents_.complete ? ChooseReplacing() : ClearInPlace());
  SetReport(/*committed=*/false);
  if (format_ != OutputFormat::kDcp) return absl::OkStatus();
  return os::WriteFileAtomically((fs::path(write_dir_) / kDcpMarkerName).string(), kMarkerText);
}

absl::Status OutputDirectory::ClearInPlace() {
  cleared_ = true;  // DIR was examined under the lock: its output files are an earlier run's
  if (!contents_.any) return absl::OkStatus();
  std::vector<std::string> left;
  SHARDKIT_RETURN_IF_ERROR(RemoveOutputFiles(dir_, &left));
  for (const std::string& name : left) {
    warnings_.push_back(absl::StrCat(
        "warning: ", dir_, ": left ", name, " alone: its process ",
        os::ParseTemporaryName(name)->pid,
        " is running on this host (a run still stopping? remove the file yourself if not)"));
  }
  return absl::OkStatus();
}

absl::Status OutputDirectory::ChooseReplacing() {
  const fs::path real(real_);
  const auto refuse = [&](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat(
        dir_, ": holds an earlier shardkit output, which a run replaces only by writing the new "
              "output beside it and swapping the two, and ",
        why, ": remove the earlier output first, or use a new directory"));
  };
  if (real_ == "/") return refuse("/ has no directory beside it");
  struct stat here {}, parent {};
  if (::stat(real_.c_str(), &here) != 0 || ::stat(real.parent_path().c_str(), &parent) != 0) {
    return refuse(absl::StrCat("it cannot be examined (", os::ErrnoText(errno), ")"));
  }
  if (here.st_dev != parent.st_dev) {
    return refuse(absl::StrCat(real_, " is a mount point (nothing beside it is on its disk)"));
  }
  place_ = absl::StrCat(".", real.filename().string(), kNewInfix, RandomSuffix());
  write_dir_ = (real.parent_path() / place_).string();
  absl::StatusOr<os::InterruptCleanup> registered = os::InterruptCleanup::Register(
      write_dir_, os::CleanupKind::kDirectory, [&]() -> absl::Status {
        if (::mkdir(write_dir_.c_str(), here.st_mode & 07777) != 0) {
          return refuse(absl::StrCat("cannot create ", write_dir_, " (", os::ErrnoText(errno),
                                     ")"));
        }
        (void)::chmod(write_dir_.c_str(), here.st_mode & 07777);  // not narrowed by the umask
        return absl::OkStatus();
      });
  if (!registered.ok()) {
    place_.clear();
    write_dir_ = dir_;
    return registered.status();
  }
  staging_cleanup_ = *std::move(registered);
  return absl::OkStatus();
}

absl::Status OutputDirectory::Follow(std::string_view place) {
  place_ = std::string(place);
  if (place_.empty()) {
    write_dir_ = dir_;
    SHARDKIT_ASSIGN_OR_RETURN(created_, os::CreatedDirectories::Make(dir_));
    return absl::OkStatus();
  }
  std::error_code ec;
  real_ = fs::canonical(dir_, ec).string();
  write_dir_ = ec ? "" : (fs::path(real_).parent_path() / place_).string();
  if (!ec && fs::is_directory(write_dir_, ec)) return absl::OkStatus();
  const std::string missing = write_dir_;
  place_.clear();
  write_dir_ = dir_;
  return absl::InvalidArgumentError(absl::StrCat(
      dir_, ": the run replaces the earlier output there by writing beside it, in ",
      missing.empty() ? std::string(place) : missing,
      ", which this rank does not see: replacing an output needs a file system every rank "
      "shares; write to a new directory, or remove the earlier output first"));
}

absl::Status OutputDirectory::Commit() {
  if (!replacing()) {
    committed_ = true;
    created_.Keep();
    SetReport(/*committed=*/true);
    lock_.reset();
    return absl::OkStatus();
  }
  SHARDKIT_RETURN_IF_ERROR(os::ExchangeDirectories(write_dir_, real_));
  committed_ = true;
  staging_cleanup_.Release();
  SetReport(/*committed=*/true);
  // write_dir_ now holds the earlier output, this run's lock file with it.
  const bool removed = os::RemoveTree(write_dir_);
  lock_.reset();  // its file is gone with the earlier output: nothing else to remove
  absl::Status synced = os::SyncDirectory(fs::path(real_).parent_path().string());
  if (!removed && synced.ok()) {
    // Not an error: the new output is in place; the next run into DIR removes the rest.
    return absl::OkStatus();
  }
  return synced;
}

void OutputDirectory::Abandon() {
  if (committed_) return;
  if (owner_ && replacing()) {
    os::RemoveTree(write_dir_);
    staging_cleanup_.Release();
  } else if (owner_ && cleared_) {
    (void)RemoveOutputFiles(dir_, nullptr);  // best effort: the run failed already
  }
  created_.RemoveIfEmpty();  // the lock file first, while it is still held
  lock_.reset();
  report_.reset();
}

void OutputDirectory::ReportInterrupts(std::string program, std::string scope) {
  program_ = std::move(program);
  scope_ = std::move(scope);
  report_ = std::make_unique<os::ScopedInterruptReport>();
  const std::string before =
      contents_.complete ? absl::StrCat(dir_, " still holds the earlier output, untouched")
                         : absl::StrCat(dir_, " holds no ", LastFileName(),
                                        " (nor did it before this run)");
  report_->Set({.program = program_,
                .scope = scope_,
                .state = before,
                .state_if_removed = absl::StrCat(dir_, ", which this run had created, is removed")});
}

void OutputDirectory::SetReport(bool committed) {
  if (!report_) return;
  const std::string done = absl::StrCat(dir_, " holds the complete new output");
  if (committed) {
    report_->Set({.program = program_, .scope = scope_, .state = done});
    return;
  }
  if (replacing()) {
    // The lock file moves into the new directory's place with the swap: there, it means the
    // swap happened.
    report_->Set({.program = program_,
                  .scope = scope_,
                  .state = absl::StrCat(dir_, " still holds the earlier output, untouched (",
                                        write_dir_, " beside it goes with the next run)"),
                  .state_if_removed = absl::StrCat(dir_, " still holds the earlier output, untouched"),
                  .probe = (fs::path(write_dir_) / os::kLockFileName).string(),
                  .state_if_probe_present = done});
    return;
  }
  report_->Set({.program = program_,
                .scope = scope_,
                .state = absl::StrCat(dir_, " holds no ", LastFileName(),
                                      " (nor did it before this run)"),
                .state_if_removed = absl::StrCat(dir_, ", which this run had created, is removed"),
                .probe = (fs::path(write_dir_) / LastFileName()).string(),
                .state_if_probe_present = done});
}

}  // namespace shardkit::checkpoint
