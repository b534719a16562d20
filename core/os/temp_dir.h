// TempDir: a fresh directory under $TMPDIR (or P_tmpdir), removed with everything in it when the
// object is destroyed. Used for `shardkit launch`'s default store and for files a command hands
// from its ranks back to itself (e.g. `shardkit demo`'s summary).
//
//   TempDir dir;
//   SHARDKIT_RETURN_IF_ERROR(dir.Create("shardkit-launch"));
//   std::string url = absl::StrCat("file://", dir.path());
//
// Thread-safety: none. Not copyable (one owner removes the directory).
#ifndef SHARDKIT_CORE_OS_TEMP_DIR_H_
#define SHARDKIT_CORE_OS_TEMP_DIR_H_

#include <string>

#include "absl/status/status.h"

namespace shardkit::os {

class TempDir {
 public:
  TempDir() = default;
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  ~TempDir();

  // Creates "<tmp>/<name_prefix>-XXXXXX". Call at most once.
  // Errors: kUnavailable naming the pattern and the system error.
  [[nodiscard]] absl::Status Create(const std::string& name_prefix);

  // Empty until Create succeeded.
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace shardkit::os

#endif  // SHARDKIT_CORE_OS_TEMP_DIR_H_
