// Fd's ownership, and the whole-buffer transfers: every byte moved across several calls, the end
// of a file (kNoBytes), errors as errno.
#include "core/os/fd.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <thread>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace shardkit::os {
namespace {

std::string TempFile(const std::string& name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir != nullptr ? dir : "/tmp") + "/" + name;
}

TEST(FdTest, ClosesOnDestructionAndMoves) {
  int raw = -1;
  {
    Fd fd(::open("/dev/null", O_RDONLY | O_CLOEXEC));
    ASSERT_TRUE(fd.valid());
    raw = fd.get();
    Fd moved = std::move(fd);
    EXPECT_FALSE(fd.valid());
    EXPECT_EQ(moved.get(), raw);
  }
  EXPECT_EQ(::fcntl(raw, F_GETFD), -1);
  EXPECT_EQ(errno, EBADF);
  Fd kept(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  const int released = kept.release();
  EXPECT_FALSE(kept.valid());
  EXPECT_EQ(::close(released), 0);
}

TEST(FdTest, ErrnoText) { EXPECT_EQ(ErrnoText(ENOENT), "No such file or directory"); }

TEST(FdTest, WritesAndReadsAtOffsets) {
  const std::string path = TempFile("fd_test.bin");
  Fd fd(::open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid());
  ASSERT_EQ(WriteFully(fd.get(), "hello", 5), 0);
  ASSERT_EQ(PwriteFully(fd.get(), "XY", 2, 10), 0);  // a gap of zeros
  char buffer[12] = {};
  ASSERT_EQ(PreadFully(fd.get(), buffer, 12, 0), 0);
  EXPECT_EQ(std::string(buffer, 12), std::string("hello\0\0\0\0\0XY", 12));
  EXPECT_EQ(PreadFully(fd.get(), buffer, 3, 11), kNoBytes);  // one byte left
  ASSERT_EQ(::lseek(fd.get(), 0, SEEK_SET), 0);
  std::string all;
  ASSERT_EQ(ReadToEnd(fd.get(), &all), 0);
  EXPECT_EQ(all.size(), 12u);
  ASSERT_EQ(::lseek(fd.get(), 3, SEEK_SET), 3);
  ASSERT_EQ(ReadFully(fd.get(), buffer, 2), 0);
  EXPECT_EQ(std::string(buffer, 2), "lo");
  EXPECT_EQ(SyncFd(fd.get()), 0);
}

TEST(FdTest, MovesMoreThanAPipeHoldsInOneCall) {
  int fds[2];
  ASSERT_EQ(::pipe2(fds, O_CLOEXEC), 0);
  Fd in(fds[0]), out(fds[1]);
  const std::string sent(1 << 20, 'x');  // far more than the pipe's 64 KiB buffer
  std::thread writer([&] { EXPECT_EQ(WriteFully(out.get(), sent.data(), sent.size()), 0); });
  std::string received(sent.size(), '\0');
  EXPECT_EQ(ReadFully(in.get(), received.data(), received.size()), 0);
  writer.join();
  EXPECT_EQ(received, sent);
  out.reset();
  char byte;
  EXPECT_EQ(ReadFully(in.get(), &byte, 1), kNoBytes);
}

TEST(FdTest, ErrorsAreErrno) {
  char byte = 0;
  EXPECT_EQ(WriteFully(-1, &byte, 1), EBADF);
  EXPECT_EQ(PreadFully(-1, &byte, 1, 0), EBADF);
  Fd dir(::open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  std::string out;
  EXPECT_EQ(ReadToEnd(dir.get(), &out), EISDIR);
}

}  // namespace
}  // namespace shardkit::os
