// pack_floor: what packing a strided piece costs on this machine beside the wire, without Gloo or
// shardkit's communicator in the way (buffers come from its allocator, as the sync bench's do) —
// the floor under weight sync's S1 target (docs/performance.md).
// Two sender/receiver pairs of processes (four, as S1's 2 sources -> 2 destinations) move `mib`
// MiB per sender over loopback TCP, four ways, one after the other, `repeats` times each:
//   contiguous  one buffer written as it is (S1's raw baseline);
//   packed      every other `run`-byte run of a 2x larger source packed into one buffer, then
//               written (what a sync round does with a strided piece: a column block of rows);
//   chunked     the same runs packed into a `chunk`-KiB buffer and written, chunk by chunk (the
//               packed bytes still in the cache when the kernel copies them);
//   gathered    the same runs written in place with writev, up to 1,024 at a time (what the Gloo
//               backend's payload mesh does with a gathered send: no packing at all).
// Prints one JSON line per way: the slowest pair's median seconds and the senders' peak RSS.
//
//   bazel run -c opt //integration/bench:pack_floor -- 512 2048 512 7   # mib run chunk-kib repeats
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/clock.h"
#include "integration/bench/bench_util.h"

namespace {

using shardkit::bench::Median;
using shardkit::bench::StatusFieldMiB;

struct Options {
  size_t bytes, run, chunk;
  int repeats;
};

void WriteAll(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = write(fd, p, n);
    if (w <= 0) _exit(3);
    p += w, n -= static_cast<size_t>(w);
  }
}

void ReadAll(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = read(fd, p, n);
    if (r <= 0) _exit(3);
    p += r, n -= static_cast<size_t>(r);
  }
}

// `bytes` of host memory, touched (its first touch is what is slow on these machines).
std::shared_ptr<shardkit::Storage> Touched(size_t bytes) {
  auto storage = shardkit::bench::TouchedStorage(shardkit::Device::Cpu(), bytes);
  if (!storage.ok()) _exit(4);
  return *std::move(storage);
}

char* Bytes(const std::shared_ptr<shardkit::Storage>& storage) {
  return reinterpret_cast<char*>(storage->data());
}

// One send of `o.bytes` the way `mode` says (0 contiguous, 1 packed, 2 chunked).
void WriteGathered(int fd, const char* src, const Options& o) {
  std::vector<iovec> iov;
  size_t at = 0;
  while (at < o.bytes) {
    iov.clear();
    size_t batch = 0;
    for (size_t a = at; a < o.bytes && iov.size() < 1024; a += o.run) {
      const size_t n = std::min(o.run, o.bytes - a);
      iov.push_back({const_cast<char*>(src + 2 * a), n});
      batch += n;
    }
    size_t done = 0, first = 0;
    while (done < batch) {
      const ssize_t w = writev(fd, iov.data() + first, static_cast<int>(iov.size() - first));
      if (w <= 0) _exit(3);
      done += static_cast<size_t>(w);
      size_t left = static_cast<size_t>(w);
      while (left > 0 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
      if (left > 0) {
        iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
        iov[first].iov_len -= left;
      }
    }
    at += batch;
  }
}

void SendOnce(int fd, int mode, const Options& o, const char* src, char* stage) {
  if (mode == 0) return WriteAll(fd, src, o.bytes);
  if (mode == 3) return WriteGathered(fd, src, o);
  const size_t block = mode == 1 ? o.bytes : o.chunk;
  for (size_t done = 0; done < o.bytes; done += block) {
    const size_t n = std::min(block, o.bytes - done);
    for (size_t at = 0; at < n; at += o.run) {
      std::memcpy(stage + at, src + 2 * (done + at), std::min(o.run, n - at));
    }
    WriteAll(fd, stage, n);
  }
}

// The sender of one pair: `repeats` timed sends per way, the median of each written to `out`.
void Sender(int fd, const Options& o, int out) {
  const std::shared_ptr<shardkit::Storage> src = Touched(2 * o.bytes), stage = Touched(o.bytes);
  double medians[4];
  for (int mode = 0; mode < 4; ++mode) {
    std::vector<double> times;
    for (int i = 0; i <= o.repeats; ++i) {  // the first one warms up
      char go = 'g', done = 0;
      const absl::Time start = absl::Now();
      WriteAll(fd, &go, 1);
      SendOnce(fd, mode, o, Bytes(src), Bytes(stage));
      ReadAll(fd, &done, 1);
      if (i > 0) times.push_back(absl::ToDoubleSeconds(absl::Now() - start));
    }
    medians[mode] = Median(std::move(times));
  }
  const double report[5] = {medians[0], medians[1], medians[2], medians[3],
                            StatusFieldMiB("VmHWM")};
  (void)!write(out, report, sizeof(report));
}

void Receiver(int fd, const Options& o) {
  const std::shared_ptr<shardkit::Storage> dst = Touched(o.bytes);
  for (int i = 0; i < 4 * (o.repeats + 1); ++i) {
    char go;
    ReadAll(fd, &go, 1);
    ReadAll(fd, Bytes(dst), o.bytes);
    WriteAll(fd, "k", 1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const Options o{(argc > 1 ? std::strtoul(argv[1], nullptr, 10) : 512) << 20,
                  argc > 2 ? std::strtoul(argv[2], nullptr, 10) : 2048,
                  (argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 512) << 10,
                  argc > 4 ? std::atoi(argv[4]) : 7};
  int results[2];
  if (pipe(results) != 0) return 1;
  std::vector<pid_t> children;
  for (int pair = 0; pair < 2; ++pair) {
    // Loopback TCP, as Gloo's: a connection made through a listener on an ephemeral port.
    const int listener = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t size = sizeof(address);
    if (bind(listener, reinterpret_cast<sockaddr*>(&address), size) != 0 ||
        listen(listener, 1) != 0 ||
        getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size) != 0) {
      return 1;
    }
    if (pid_t child = fork(); child == 0) {
      Receiver(accept(listener, nullptr, nullptr), o);
      _exit(0);
    } else {
      children.push_back(child);
    }
    if (pid_t child = fork(); child == 0) {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      if (connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)) != 0) _exit(2);
      Sender(fd, o, results[1]);
      _exit(0);
    } else {
      children.push_back(child);
    }
    close(listener);
  }
  double worst[5] = {0, 0, 0, 0, 0};
  for (int pair = 0; pair < 2; ++pair) {
    double report[5];
    if (read(results[0], report, sizeof(report)) != sizeof(report)) return 1;
    for (int i = 0; i < 5; ++i) worst[i] = std::max(worst[i], report[i]);
  }
  for (pid_t child : children) waitpid(child, nullptr, 0);
  const char* names[4] = {"contiguous", "packed", "chunked", "gathered"};
  for (int mode = 0; mode < 4; ++mode) {
    std::printf(
        "{\"way\":\"%s\",\"mib\":%zu,\"run\":%zu,\"chunk_kib\":%zu,\"median_s\":%.4f,"
        "\"ratio\":%.3f,\"peak_rss_mib\":%.1f}\n",
        names[mode], o.bytes >> 20, o.run, o.chunk >> 10, worst[mode], worst[mode] / worst[0],
        worst[4]);
  }
  return 0;
}
