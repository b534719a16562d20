#include "core/os/proc_status.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <vector>

#include "testing/status_matchers.h"

namespace shardkit::os {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

constexpr int64_t kMiB = int64_t{1} << 20;
constexpr int64_t kTouched = 64 * kMiB;
// Growth other than the buffer allowed for (transparent huge pages, allocator, gtest).
constexpr int64_t kSlack = 16 * kMiB;

// An anonymous mapping of `size` bytes with every page written: `size` more resident bytes.
class TouchedMapping {
 public:
  explicit TouchedMapping(int64_t size) : size_(static_cast<size_t>(size)) {
    data_ = ::mmap(nullptr, size_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data_ == MAP_FAILED) return;
    volatile char* bytes = static_cast<char*>(data_);
    const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
    for (size_t i = 0; i < size_; i += page) bytes[i] = 1;
  }
  ~TouchedMapping() {
    if (ok()) ::munmap(data_, size_);
  }
  bool ok() const { return data_ != MAP_FAILED; }

 private:
  size_t size_;
  void* data_ = MAP_FAILED;
};

TEST(StatusFieldBytes, ParsesTheWholeFieldNameInKiB) {
  const char text[] = "Name:\tx\nVmHWMish:\t  1 kB\nVmHWM:\t    1234 kB\nVmRSS:\t 7 kB\n";
  EXPECT_THAT(StatusFieldBytes(text, "VmHWM"), IsOkAndHolds(1234 * 1024));
  EXPECT_THAT(StatusFieldBytes(text, "VmRSS"), IsOkAndHolds(7 * 1024));
  EXPECT_THAT(StatusFieldBytes(text, "VmRS"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("VmRS")));
}

TEST(StatusFieldBytes, RejectsValuesThatAreNotKiB) {
  EXPECT_THAT(StatusFieldBytes("VmRSS:\t12 MB\n", "VmRSS"),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("VmRSS is \"12 MB\", expected a number of kB")));
  EXPECT_THAT(StatusFieldBytes("VmRSS:\tx kB\n", "VmRSS"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("VmRSS")));
  EXPECT_THAT(StatusFieldBytes("VmRSS:\t99999999999999999 kB\n", "VmRSS"),
              StatusIs(absl::StatusCode::kUnavailable, HasSubstr("VmRSS")));
}

TEST(ProcStatusBytes, MissingFieldIsNotFound) {
  EXPECT_THAT(ProcStatusBytes("VmNoSuchField"),
              StatusIs(absl::StatusCode::kNotFound,
                       HasSubstr("/proc/self/status: no VmNoSuchField field")));
}

// ThreadSanitizer keeps shadow memory for what the program touches, several times its size.
#if defined(__SANITIZE_THREAD__)
constexpr int64_t kShadowFactor = 4;
#else
constexpr int64_t kShadowFactor = 1;
#endif

TEST(ProcStatusBytes, RssGrowsByTheBytesTouched) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const int64_t before, ProcStatusBytes("VmRSS"));
  TouchedMapping mapping(kTouched);
  ASSERT_TRUE(mapping.ok());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const int64_t after, ProcStatusBytes("VmRSS"));
  EXPECT_GE(after - before, kTouched - kSlack / 16);
  EXPECT_LE(after - before, kTouched * kShadowFactor + kSlack);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const int64_t peak, ProcStatusBytes("VmHWM"));
  EXPECT_GE(peak, after);
}

TEST(ResetPeakRss, BringsThePeakDownToTheCurrentRss) {
  {
    TouchedMapping mapping(kTouched);
    ASSERT_TRUE(mapping.ok());
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const int64_t peak_before, ProcStatusBytes("VmHWM"));
  const absl::Status reset = ResetPeakRss();
  if (absl::IsUnavailable(reset)) GTEST_SKIP() << reset;  // e.g. a kernel older than 4.0
  ASSERT_THAT(reset, IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const int64_t peak_after, ProcStatusBytes("VmHWM"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const int64_t rss, ProcStatusBytes("VmRSS"));
  EXPECT_GE(peak_before - peak_after, kTouched - kSlack);
  EXPECT_LE(peak_after, rss + kSlack);
}

// A listener on 127.0.0.1 and `n` connections to it, both ends open: 2n connected sockets here.
TEST(CountTcpConnections, CountsBothEndsButNotTheListenerOrOtherSockets) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const int before, CountTcpConnections());
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t size = sizeof(address);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&address), size), 0);
  ASSERT_EQ(::listen(listener, 8), 0);
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&address), &size), 0);
  int unix_pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_STREAM, 0, unix_pair), 0);
  EXPECT_THAT(CountTcpConnections(), IsOkAndHolds(before));
  std::vector<int> fds;
  for (int i = 0; i < 3; ++i) {
    const int client = ::socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(::connect(client, reinterpret_cast<sockaddr*>(&address), size), 0);
    fds.push_back(client);
    fds.push_back(::accept(listener, nullptr, nullptr));
    ASSERT_GE(fds.back(), 0);
  }
  EXPECT_THAT(CountTcpConnections(), IsOkAndHolds(before + 6));
  for (int fd : fds) ::close(fd);
  for (int fd : {listener, unix_pair[0], unix_pair[1]}) ::close(fd);
  EXPECT_THAT(CountTcpConnections(), IsOkAndHolds(before));
}

}  // namespace
}  // namespace shardkit::os
