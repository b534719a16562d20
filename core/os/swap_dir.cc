#include "core/os/swap_dir.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <system_error>

#include "absl/strings/str_cat.h"
#include "core/os/fd.h"

namespace shardkit::os {

static_assert(sizeof(sigset_t) <= sizeof(unsigned long[16]), "ScopedInterruptBlock::saved_");

absl::Status ExchangeDirectories(const std::string& a, const std::string& b) {
  if (::renameat2(AT_FDCWD, a.c_str(), AT_FDCWD, b.c_str(), RENAME_EXCHANGE) == 0) {
    return absl::OkStatus();
  }
  const int err = errno;
  const std::string text = absl::StrCat("cannot swap ", a, " and ", b, ": ", ErrnoText(err));
  if (err == EINVAL || err == ENOSYS) return absl::UnimplementedError(text);
  return absl::InvalidArgumentError(text);
}

bool RemoveTree(const std::string& path) {
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
  return !ec;
}

ScopedInterruptBlock::ScopedInterruptBlock() {
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGINT);
  sigaddset(&block, SIGTERM);
  sigaddset(&block, SIGHUP);
  sigset_t saved;
  ::pthread_sigmask(SIG_BLOCK, &block, &saved);
  std::memcpy(saved_, &saved, sizeof(saved));
}

ScopedInterruptBlock::~ScopedInterruptBlock() {
  sigset_t saved;
  std::memcpy(&saved, saved_, sizeof(saved));
  ::pthread_sigmask(SIG_SETMASK, &saved, nullptr);
}

}  // namespace shardkit::os
