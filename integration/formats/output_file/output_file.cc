#include "integration/formats/output_file/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>

#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/os/fd.h"
#include "core/os/files.h"
#include "nlohmann/json.hpp"

namespace shardkit::formats {
namespace {

namespace fs = std::filesystem;
using os::CheckOutputType;
using os::ErrnoText;
using os::Fd;
using os::FileTypeText;
using os::kNoBytes;
using os::PreadFully;

// pread of exactly `size` bytes at `offset`. Returns 0, or the errno (EIO for an early end of
// file).
int ReadFully(int fd, char* out, size_t size, off_t offset) {
  const int err = PreadFully(fd, out, size, static_cast<uint64_t>(offset));
  return err == kNoBytes ? EIO : err;
}

// Opens the regular file `path` for reading — never a device node (opening one may act on the
// device), nor through a final link, nor blocking on a fifo; `*size` receives its size. Errors:
// kInvalidArgument naming the OS error, or what it is.
absl::StatusOr<int> OpenRegular(const std::string& path, uint64_t* size) {
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0 && !S_ISREG(st.st_mode)) {  // not even opened: a device
    return absl::InvalidArgumentError(absl::StrCat(path, ": is ", FileTypeText(st.st_mode)));
  }
  const int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": cannot open: ", ErrnoText(errno)));
  }
  const bool examined = ::fstat(fd, &st) == 0;  // what was opened, should the path have changed
  if (!examined || !S_ISREG(st.st_mode)) {
    const std::string why = examined ? absl::StrCat("is ", FileTypeText(st.st_mode))
                                     : "cannot examine: " + ErrnoText(errno);
    ::close(fd);
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", why));
  }
  *size = static_cast<uint64_t>(st.st_size);
  return fd;
}

// Why the open regular file `fd` of `size` bytes is not a safetensors file; nullopt if it is.
std::optional<std::string> NotSafetensors(int fd, uint64_t size) {
  if (size < 8) return absl::StrCat("it is ", size, " bytes long, shorter than a header length");
  unsigned char bytes[8];
  if (const int err = ReadFully(fd, reinterpret_cast<char*>(bytes), 8, 0); err != 0) {
    return absl::StrCat("cannot read it: ", ErrnoText(err));
  }
  uint64_t length = 0;
  for (int i = 7; i >= 0; --i) length = (length << 8) | bytes[i];
  if (length > size - 8) {
    return absl::StrCat("its first 8 bytes give a header length of ", length, " bytes, beyond its ",
                        size, " bytes");
  }
  if (length > kMaxSafetensorsHeaderBytes) {
    return absl::StrCat("header length ", length, " exceeds the format's limit of ",
                        kMaxSafetensorsHeaderBytes, " bytes");
  }
  std::string header(length, '\0');
  if (const int err = ReadFully(fd, header.data(), header.size(), 8); err != 0) {
    return absl::StrCat("cannot read its header: ", ErrnoText(err));
  }
  const size_t first = header.find_first_not_of(" \t\r\n");
  bool valid = false;
  try {  // accept() validates without building a document (no recursion on deep nesting)
    valid = first != std::string::npos && header[first] == '{' && nlohmann::json::accept(header);
  } catch (const std::exception&) {
    valid = false;
  }
  if (!valid) return "its header is not a JSON object";
  return std::nullopt;
}

// Why the open regular file `fd` of `size` bytes is not an earlier output of rules' text kind.
std::optional<std::string> NotEarlierText(int fd, uint64_t size, const OutputRules& rules) {
  if (size == 0) return std::nullopt;
  const std::string& signature = rules.text_signature;
  std::string start(std::min<uint64_t>(size, signature.size()), '\0');
  if (ReadFully(fd, start.data(), start.size(), 0) == 0 && !signature.empty() &&
      start == signature) {
    return std::nullopt;
  }
  return absl::StrCat("it is not empty and does not begin with \"", signature, "\"");
}

// OUT's real path: its parent's, symbolic links and ".." resolved as far as the parent exists,
// joined with OUT's own name (not resolved: a link there is refused by CheckOutputType).
std::string RealOutputPath(const std::string& out) {
  const fs::path path(out);
  std::error_code ec;
  fs::path parent = path.parent_path();
  if (parent.empty()) parent = ".";
  fs::path real = fs::weakly_canonical(fs::absolute(parent, ec), ec);
  return (real / path.filename()).string();
}

std::string RealPath(const std::string& path) {
  std::error_code ec;
  std::string text = fs::weakly_canonical(fs::absolute(path, ec), ec).string();
  while (text.size() > 1 && text.back() == '/') text.pop_back();
  return text;
}

absl::Status CheckOutside(const std::string& out, const OutputRules& rules) {
  const std::string real_out = RealOutputPath(out);
  for (const KeepOutOf& input : rules.keep_out_of) {
    const std::string real = RealPath(input.path);
    const bool same = real_out == real;
    if (!same && !absl::StartsWith(real_out, real == "/" ? real : real + "/")) continue;
    return absl::InvalidArgumentError(
        absl::StrCat(rules.name, " ", out, same ? " is " : " is inside ", input.description, " (",
                     input.path, same ? "): pick another path" : "): pick a path outside it"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status IsSafetensorsFile(const std::string& path) {
  uint64_t size = 0;
  absl::StatusOr<int> fd = OpenRegular(path, &size);
  if (!fd.ok()) return fd.status();
  const Fd closer(*fd);  // closes it
  if (std::optional<std::string> why = NotSafetensors(*fd, size)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a safetensors file: ", *why));
  }
  return absl::OkStatus();
}

absl::Status CheckOutputFile(const std::string& out, const OutputRules& rules) {
  const std::string name = fs::path(out).filename().string();
  if (name.empty() || name == "." || name == "..") {
    return absl::InvalidArgumentError(
        absl::StrCat(rules.name, " ", out, " names a directory: give the path of a file"));
  }
  if (absl::Status s = CheckOutside(out, rules); !s.ok()) return s;
  if (absl::Status s = CheckOutputType(out, rules.name); !s.ok()) return s;
  struct stat st;
  if (::lstat(out.c_str(), &st) != 0) return absl::OkStatus();  // nothing there: nothing to lose
  uint64_t size = 0;
  absl::StatusOr<int> fd = OpenRegular(out, &size);
  if (!fd.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(rules.name, " exists and cannot be examined: ", fd.status().message()));
  }
  const Fd closer(*fd);  // closes it
  const bool text = rules.existing == ExistingOutput::kText;
  const std::optional<std::string> why =
      text ? NotEarlierText(*fd, size, rules) : NotSafetensors(*fd, size);
  if (!why) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat(
      rules.name, " ", out, " exists and is not ", text ? rules.text_kind : "a safetensors file",
      " (", *why, "): refusing to replace it (remove it first, or pick another path)"));
}

}  // namespace shardkit::formats
