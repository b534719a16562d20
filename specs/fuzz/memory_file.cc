#include "specs/fuzz/memory_file.h"

#include <sys/mman.h>
#include <unistd.h>

#include "core/base/check.h"

namespace shardkit::fuzz {

int MemoryFile(const uint8_t* data, size_t size) {
  static const int fd = memfd_create("fuzz_input", 0);
  SHARDKIT_CHECK(fd >= 0) << "memfd_create failed";
  SHARDKIT_CHECK(ftruncate(fd, 0) == 0 && pwrite(fd, data, size, 0) == static_cast<ssize_t>(size))
      << "cannot write the input";
  return fd;
}

std::string MemoryFilePath(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

}  // namespace shardkit::fuzz
