// For fuzz targets of file readers: the input bytes as a file, without touching the disk — one
// anonymous in-memory file (memfd) per process, rewritten for every input.
//
//   const int fd = fuzz::MemoryFile(data, size);     // pread-able, `size` bytes long
//   Reader::Open(fuzz::MemoryFilePath(fd));          // or by path: "/proc/self/fd/N"
#ifndef SHARDKIT_SPECS_FUZZ_MEMORY_FILE_H_
#define SHARDKIT_SPECS_FUZZ_MEMORY_FILE_H_

#include <cstddef>
#include <cstdint>
#include <string>

namespace shardkit::fuzz {

// The process's memory file, holding exactly `data`. Aborts if it cannot be written (an
// environment problem, not an input). Not thread-safe.
int MemoryFile(const uint8_t* data, size_t size);

// "/proc/self/fd/<fd>".
std::string MemoryFilePath(int fd);

}  // namespace shardkit::fuzz

#endif  // SHARDKIT_SPECS_FUZZ_MEMORY_FILE_H_
