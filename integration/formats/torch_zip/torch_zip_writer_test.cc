#include "integration/formats/torch_zip/torch_zip_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/os/fd.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/formats/torch_zip/internal/crc32.h"
#include "integration/formats/torch_zip/torch_zip.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::torch_zip {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

// Writes `bytes` at `offset` of `path` (created if missing; a gap before it stays a hole).
void WriteAt(const std::string& path, uint64_t offset, const std::string& bytes) {
  os::Fd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644));
  ASSERT_TRUE(fd.valid()) << path;
  ASSERT_EQ(::pwrite(fd.get(), bytes.data(), bytes.size(), static_cast<off_t>(offset)),
            static_cast<ssize_t>(bytes.size()));
}

absl::StatusOr<TensorRecord> ReadBack(const std::string& path, uint64_t offset, uint64_t length) {
  os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return absl::NotFoundError(path);
  const off_t size = ::lseek(fd.get(), 0, SEEK_END);
  return ReadTensorRecord(fd.get(), static_cast<uint64_t>(size), offset, length, path);
}

std::string Pattern(uint64_t length) {
  std::string values(length, '\0');
  for (uint64_t i = 0; i < length; ++i) values[i] = static_cast<char>(i * 7 + 3);
  return values;
}

TEST(Crc32Test, KnownValues) {
  EXPECT_EQ(internal::Crc32(""), 0u);
  EXPECT_EQ(internal::Crc32("123456789"), 0xcbf43926u);
  EXPECT_EQ(internal::Crc32("little"), 0x19e33d85u);  // torch's byteorder record
}

// Every dtype the reader knows, every kind of shape: the archive, its values written at
// prefix.size() by the caller, behind another item in the file, reads back as written.
TEST(TorchZipWriterTest, ReadTensorRecordFindsWhatWasWritten) {
  const std::string dir = shardkit::testing::FreshTestDir("zip_writer");
  const std::vector<Shape> shapes = {{2, 3}, {5}, {}, {0, 3}, {4, 0}, {1, 1, 3}};
  int n = 0;
  for (DType dtype : kAllDTypes) {
    for (const Shape& shape : shapes) {
      SCOPED_TRACE(std::string(DTypeName(dtype)) + " " + ShapeToString(shape));
      absl::StatusOr<TensorArchive> archive = MakeTensorArchive(dtype, shape);
      ASSERT_TRUE(archive.ok()) << archive.status();
      const uint64_t numel = shape.empty() ? 1 : [&] {
        uint64_t product = 1;
        for (int64_t dim : shape) product *= dim;
        return product;
      }();
      ASSERT_EQ(archive->data_length, numel * ElementSize(dtype));
      EXPECT_EQ(archive->prefix.size() % 64, 0u) << "values 64-byte aligned in the archive";
      const std::string path = absl::StrCat(dir, "/item", n++);
      const uint64_t at = 1000;  // an earlier item's bytes
      const std::string values = Pattern(archive->data_length);
      WriteAt(path, 0, std::string(at, 'x'));
      WriteAt(path, at, archive->prefix + values + archive->suffix);
      absl::StatusOr<TensorRecord> record = ReadBack(path, at, archive->size());
      ASSERT_TRUE(record.ok()) << record.status();
      EXPECT_EQ(record->dtype, dtype);
      EXPECT_EQ(record->shape, shape);
      EXPECT_TRUE(record->row_major);
      EXPECT_EQ(record->storage_offset, 0);
      EXPECT_EQ(record->data_offset, at + archive->prefix.size());
      EXPECT_EQ(record->data_length, archive->data_length);
      EXPECT_EQ(record->storage_record_length, archive->data_length);
    }
  }
}

TEST(TorchZipWriterTest, SameInputSameBytes) {
  absl::StatusOr<TensorArchive> a = MakeTensorArchive(DType::kBFloat16, {4, 6});
  absl::StatusOr<TensorArchive> b = MakeTensorArchive(DType::kBFloat16, {4, 6});
  absl::StatusOr<TensorArchive> other = MakeTensorArchive(DType::kBFloat16, {6, 4});
  ASSERT_TRUE(a.ok() && b.ok() && other.ok());
  EXPECT_EQ(a->prefix, b->prefix);
  EXPECT_EQ(a->suffix, b->suffix);
  EXPECT_NE(a->prefix, other->prefix);
}

// The layout torch writes: an empty data/0 has no data descriptor (flag 0x800), a non-empty one
// a 16-byte descriptor with CRC-32 0 first in the suffix.
TEST(TorchZipWriterTest, DataDescriptorOfTheValues) {
  absl::StatusOr<TensorArchive> full = MakeTensorArchive(DType::kFloat32, {3});
  absl::StatusOr<TensorArchive> empty = MakeTensorArchive(DType::kFloat32, {0});
  ASSERT_TRUE(full.ok() && empty.ok());
  EXPECT_EQ(full->suffix.substr(0, 16), std::string("PK\7\x08\0\0\0\0\x0c\0\0\0\x0c\0\0\0", 16));
  EXPECT_EQ(empty->suffix.substr(0, 4), "PK\3\4");  // the next record's local header
}

// Values of 5 GiB: zip64 sizes for data/0 and zip64 offsets for the records after it. The file
// is sparse: only the prefix and the suffix are written.
TEST(TorchZipWriterTest, Zip64AboveFourGiB) {
  const int64_t numel = int64_t{5} << 30;
  absl::StatusOr<TensorArchive> archive = MakeTensorArchive(DType::kUInt8, {numel});
  ASSERT_TRUE(archive.ok()) << archive.status();
  EXPECT_EQ(archive->data_length, static_cast<uint64_t>(numel));
  EXPECT_EQ(archive->suffix.substr(0, 8), std::string("PK\7\x08\0\0\0\0", 8));
  const std::string path = shardkit::testing::TestPath("zip64.item");
  WriteAt(path, 0, archive->prefix);
  WriteAt(path, archive->prefix.size() + archive->data_length, archive->suffix);
  absl::StatusOr<TensorRecord> record = ReadBack(path, 0, archive->size());
  ASSERT_TRUE(record.ok()) << record.status();
  EXPECT_EQ(record->shape, Shape({numel}));
  EXPECT_EQ(record->data_offset, archive->prefix.size());
  EXPECT_EQ(record->data_length, static_cast<uint64_t>(numel));
  ::unlink(path.c_str());
}

TEST(TorchZipWriterTest, RefusesWhatTorchSaveCannotHoldThatWay) {
  EXPECT_THAT(MakeTensorArchive(DType::kFloat4E2M1, {8}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("dtype float4_e2m1")));
  EXPECT_THAT(MakeTensorArchive(DType::kFloat32, Shape(65, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("65 dimensions")));
  EXPECT_THAT(MakeTensorArchive(DType::kFloat32, {int64_t{1} << 40, int64_t{1} << 40}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("shape")));
}

}  // namespace
}  // namespace shardkit::torch_zip
