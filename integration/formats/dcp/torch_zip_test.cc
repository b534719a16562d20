#include "integration/formats/torch_zip/torch_zip.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/os/fd.h"
#include "core/os/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/dcp/test_util.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::dcp {

using ::shardkit::torch_zip::ReadTensorRecord;
using ::shardkit::torch_zip::TensorRecord;
namespace {

using ::shardkit::dcp::testing::FixturePath;
using ::shardkit::testing::StatusIs;
using ::testing::AllOf;
using ::testing::HasSubstr;
using namespace std::string_literals;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

std::string ReadFile(const std::string& path) {
  absl::StatusOr<std::string> bytes = os::ReadWholeFile(path);
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : std::string();
}

absl::StatusOr<TensorRecord> ReadRecord(const std::string& path, const StorageItem& item) {
  os::Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return absl::NotFoundError(path);
  const off_t size = ::lseek(fd.get(), 0, SEEK_END);
  return ReadTensorRecord(fd.get(), static_cast<uint64_t>(size), item.offset, item.length, path);
}

// The chunk's values gathered from `file` by the record's strides, row-major.
std::string Gather(const std::string& file, const TensorRecord& record) {
  const size_t element = ElementSize(record.dtype);
  int64_t numel = 1;
  for (int64_t size : record.shape) numel *= size;
  std::string out;
  std::vector<int64_t> index(record.shape.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t at = 0;
    for (size_t d = 0; d < index.size(); ++d) at += index[d] * record.strides[d];
    out += file.substr(record.data_offset + at * element, element);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < record.shape[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// The box (offsets, sizes) of a row-major tensor of `shape` whose bytes are `whole`.
std::string Box(const std::string& whole, const Shape& shape, const Chunk& chunk, size_t element) {
  int64_t numel = 1;
  for (int64_t size : chunk.sizes) numel *= size;
  std::string out;
  std::vector<int64_t> index(shape.size(), 0);
  for (int64_t n = 0; n < numel; ++n) {
    int64_t at = 0;
    for (size_t d = 0; d < shape.size(); ++d) at = at * shape[d] + chunk.offsets[d] + index[d];
    out += whole.substr(at * element, element);
    for (size_t d = index.size(); d-- > 0;) {
      if (++index[d] < chunk.sizes[d]) break;
      index[d] = 0;
    }
  }
  return out;
}

// Every chunk of every tensor of a fixture: the record matches the chunk, and its bytes are the
// values make_fixtures.py saved.
void CheckFixture(const std::string& name, int* non_row_major) {
  SCOPED_TRACE(name);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Metadata metadata, ReadMetadata(FixturePath(name)));
  for (const TensorEntry& tensor : metadata.tensors) {
    const std::string expected =
        ReadFile(FixturePath(absl::StrCat(name, ".expected/", tensor.fqn, ".bin")));
    for (const Chunk& chunk : tensor.chunks) {
      SCOPED_TRACE(absl::StrCat(tensor.fqn, " at ", ShapeToString(chunk.offsets)));
      const std::string path = FixturePath(absl::StrCat(name, "/", chunk.item.file));
      SHARDKIT_ASSERT_OK_AND_ASSIGN(TensorRecord record, ReadRecord(path, chunk.item));
      EXPECT_EQ(record.dtype, tensor.dtype);
      EXPECT_EQ(record.shape, chunk.sizes);
      EXPECT_GE(record.data_offset, chunk.item.offset);
      EXPECT_LE(record.data_offset + record.data_length, chunk.item.offset + chunk.item.length);
      const std::string file = ReadFile(path);
      const std::string values = Box(expected, tensor.shape, chunk, ElementSize(tensor.dtype));
      if (record.row_major) {
        EXPECT_EQ(record.data_length, values.size());
        EXPECT_EQ(file.substr(record.data_offset, record.data_length), values);
      } else {
        ++*non_row_major;
        EXPECT_EQ(Gather(file, record), values);
      }
    }
  }
}

TEST(TorchZip, LocatesTheValuesOfEveryChunkTorchWrote) {
  int non_row_major = 0;
  for (const std::string name : {"basic", "sharded", "local"}) CheckFixture(name, &non_row_major);
  EXPECT_EQ(non_row_major, 1);  // basic's clone of a transposed tensor
}

TEST(TorchZip, ReportsTheStridesOfACloneOfATransposedTensor) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Metadata metadata, ReadMetadata(FixturePath("basic")));
  const Chunk* chunk = nullptr;
  const Chunk* fp8 = nullptr;
  for (const TensorEntry& tensor : metadata.tensors) {
    if (tensor.fqn == "t") chunk = &tensor.chunks[0];
    if (tensor.fqn == "e4m3") fp8 = &tensor.chunks[0];
  }
  ASSERT_NE(chunk, nullptr);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TensorRecord record,
                                ReadRecord(FixturePath("basic/__0_0.distcp"), chunk->item));
  EXPECT_FALSE(record.row_major);
  EXPECT_EQ(record.shape, (Shape{3, 2}));
  EXPECT_EQ(record.strides, (Shape{1, 3}));
  EXPECT_EQ(record.data_length, 24u);  // dense: every element of the storage, in another order
  EXPECT_EQ((record.data_offset - chunk->item.offset) % 64, 0u);  // torch aligns records to 64
  // An FP8 tensor is pickled with _rebuild_tensor_v3 and torch.UntypedStorage.
  ASSERT_NE(fp8, nullptr);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TensorRecord fp8_record,
                                ReadRecord(FixturePath("basic/__0_0.distcp"), fp8->item));
  EXPECT_EQ(fp8_record.dtype, DType::kFloat8E4M3);
  EXPECT_EQ(fp8_record.data_length, 5u);
}

TEST(TorchZip, ABytesItemIsNoTensor) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Metadata metadata, ReadMetadata(FixturePath("basic")));
  ASSERT_EQ(metadata.bytes.back().fqn, "step");
  EXPECT_THAT(ReadRecord(FixturePath("basic/__0_0.distcp"), metadata.bytes.back().item),
              StatusIs(kInvalid, AllOf(HasSubstr("archive/data.pkl at byte"),
                                       HasSubstr("expected a torch._utils._rebuild_tensor_v2 "
                                                 "object, found int 7"))));
}

// A copy of basic's item "w" (a [2, 3] F32 tensor), to mutate.
class HostileArchive : public ::testing::Test {
 protected:
  void SetUp() override {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Metadata metadata, ReadMetadata(FixturePath("basic")));
    for (const TensorEntry& tensor : metadata.tensors) {
      if (tensor.fqn == "w") item_ = tensor.chunks[0].item;
    }
    const std::string file = ReadFile(FixturePath("basic/__0_0.distcp"));
    archive_ = file.substr(item_.offset, item_.length);
    path_ = shardkit::testing::FreshTestDir("hostile") + "/__0_0.distcp";
  }

  // Writes `prefix` bytes of garbage, then the (mutated) archive, and reads it.
  absl::StatusOr<TensorRecord> Read(uint64_t length_change = 0) {
    const std::string prefix(100, 'x');
    EXPECT_TRUE(os::WriteFileAtomically(path_, prefix + archive_).ok());
    return ReadRecord(path_, {"__0_0.distcp", prefix.size(), archive_.size() - length_change});
  }

  // Where the central directory entry named `name` starts in archive_.
  size_t CentralEntry(const std::string& name) {
    size_t at = 0;
    while ((at = archive_.find("PK\x01\x02", at)) != std::string::npos) {
      const size_t name_size =
          static_cast<uint8_t>(archive_[at + 28]) | static_cast<uint8_t>(archive_[at + 29]) << 8;
      if (archive_.compare(at + 46, name_size, name) == 0) return at;
      ++at;
    }
    ADD_FAILURE() << "no central directory entry " << name;
    return 0;
  }

  void Put32(size_t at, uint32_t value) { Put(archive_, at, value, 4); }

  static void Put(std::string& bytes, size_t at, uint64_t value, int size) {
    for (int i = 0; i < size; ++i) bytes[at + i] = static_cast<char>(value >> (8 * i));
  }
  static uint64_t Get(const std::string& bytes, size_t at, int size) {
    uint64_t value = 0;
    for (int i = size - 1; i >= 0; --i) value = value << 8 | static_cast<uint8_t>(bytes[at + i]);
    return value;
  }

  // Rewrites the central directory entry `name` the way a writer does for records past 4 GiB:
  // sizes and local header offset 0xffffffff, their values in a zip64 extra field.
  void MoveToZip64Extra(const std::string& name) {
    const size_t end64 = archive_.rfind("PK\x06\x06");
    const size_t locator = archive_.rfind("PK\x06\x07");
    const size_t end = archive_.rfind("PK\x05\x06");
    ASSERT_TRUE(end64 != std::string::npos && locator != std::string::npos &&
                end != std::string::npos);
    const size_t entry = CentralEntry(name);
    const size_t name_size = Get(archive_, entry + 28, 2),
                 extra_size = Get(archive_, entry + 30, 2);
    std::string header = archive_.substr(entry, 46 + name_size + extra_size);
    std::string zip64 = "\x01"s + '\0' + "\x18"s + '\0' + std::string(24, '\0');
    Put(zip64, 4, Get(header, 24, 4), 8);   // uncompressed
    Put(zip64, 12, Get(header, 20, 4), 8);  // compressed
    Put(zip64, 20, Get(header, 42, 4), 8);  // local header offset
    for (size_t field : {20, 24, 42}) Put(header, field, 0xffffffff, 4);
    Put(header, 30, extra_size + zip64.size(), 2);
    header += zip64;
    const size_t old_size = 46 + name_size + extra_size;
    archive_.replace(entry, old_size, header);
    const size_t grow = header.size() - old_size;
    Put(archive_, end64 + grow + 40, Get(archive_, end64 + grow + 40, 8) + grow, 8);  // CD size
    Put(archive_, locator + grow + 8, Get(archive_, locator + grow + 8, 8) + grow, 8);
    Put(archive_, end + grow + 12, Get(archive_, end + grow + 12, 4) + grow, 4);
  }

  StorageItem item_;
  std::string archive_;
  std::string path_;
};

TEST_F(HostileArchive, TheUnchangedCopyReads) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TensorRecord record, Read());
  EXPECT_EQ(record.shape, (Shape{2, 3}));
  EXPECT_TRUE(record.row_major);
}

TEST_F(HostileArchive, Zip64ExtraFieldsAreRead) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TensorRecord before, Read());
  MoveToZip64Extra("archive/data/0");
  MoveToZip64Extra("archive/data.pkl");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(TensorRecord after, Read());
  EXPECT_EQ(after.data_offset, before.data_offset);
  EXPECT_EQ(after.data_length, 24u);
  // The same values without their extra field: refused.
  const size_t entry = CentralEntry("archive/data/0");
  Put(archive_, entry + 30, 0, 2);  // extra field length
  EXPECT_THAT(Read(), StatusIs(kInvalid, HasSubstr("zip64")));
}

TEST_F(HostileArchive, TruncatedArchivesAndFiles) {
  EXPECT_THAT(Read(/*length_change=*/1),
              StatusIs(kInvalid, AllOf(HasSubstr("__0_0.distcp item at bytes [100, 1676)"),
                                       HasSubstr("no end of central directory record"))));
  EXPECT_THAT(Read(/*length_change=*/archive_.size() - 10),
              StatusIs(kInvalid, HasSubstr("fewer than a zip's end record")));
  // The item's range past the file's end.
  EXPECT_THAT(ReadRecord(FixturePath("basic/__0_0.distcp"),
                         {"__0_0.distcp", item_.offset, item_.length + 1000000}),
              StatusIs(kInvalid, HasSubstr("runs past the end of the file (16399 bytes)")));
}

TEST_F(HostileArchive, ARecordPointingPastTheArchive) {
  Put32(CentralEntry("archive/data/0") + 20, 0x7fffffff);  // compressed size
  Put32(CentralEntry("archive/data/0") + 24, 0x7fffffff);  // uncompressed size
  EXPECT_THAT(Read(), StatusIs(kInvalid, AllOf(HasSubstr("record \"archive/data/0\": its "
                                                         "2147483647 bytes at"),
                                               HasSubstr("run into the central directory"))));
}

TEST_F(HostileArchive, ALocalHeaderOffsetPastTheArchive) {
  Put32(CentralEntry("archive/data.pkl") + 42, 0x7ffffff0);
  EXPECT_THAT(Read(), StatusIs(kInvalid, HasSubstr("record \"archive/data.pkl\": local header "
                                                   "offset 2147483632 is not before")));
}

TEST_F(HostileArchive, ACompressedRecord) {
  archive_[CentralEntry("archive/data/0") + 10] = 8;  // deflate
  EXPECT_THAT(Read(), StatusIs(kInvalid, HasSubstr("\"archive/data/0\" is compressed (method 8)")));
}

TEST_F(HostileArchive, AForbiddenGlobalInDataPkl) {
  const size_t global = archive_.find("ctorch._utils\n_rebuild_tensor_v2\n");
  ASSERT_NE(global, std::string::npos);
  archive_.replace(global, 14, "cposix\nsystem\n");
  EXPECT_THAT(Read(), StatusIs(kInvalid, AllOf(HasSubstr("archive/data.pkl at byte"),
                                               HasSubstr("pickle byte 2: global \"posix.system\" "
                                                         "is not allowed"))));
}

TEST_F(HostileArchive, AStorageLargerThanItsRecord) {
  // The persistent id's numel (6 elements of the [2, 3] tensor) as 7.
  const size_t numel = archive_.find("cpuq\x04K\x06");
  ASSERT_NE(numel, std::string::npos);
  archive_[numel + 6] = 7;
  EXPECT_THAT(Read(), StatusIs(kInvalid, HasSubstr("record data/0 has 24 bytes but data.pkl's "
                                                   "storage has 28")));
}

TEST_F(HostileArchive, BigEndian) {
  const size_t order = archive_.find("little");
  ASSERT_NE(order, std::string::npos);
  archive_.replace(order, 6, "big   ");
  EXPECT_THAT(Read(), StatusIs(kInvalid, HasSubstr("byteorder is \"big   \"")));
}

}  // namespace
}  // namespace shardkit::dcp
