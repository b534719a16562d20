#include "integration/formats/safetensors/safetensors.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "specs/fingerprint.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::safetensors {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::_;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Writes a raw file: 8-byte length, `header`, `data_bytes` zero bytes.
std::string WriteRaw(const std::string& name, const std::string& header, size_t data_bytes,
                     uint64_t length_override = 0) {
  std::string path = testing::TestPath(name);
  std::ofstream out(path, std::ios::binary);
  uint64_t length = length_override ? length_override : header.size();
  for (int i = 0; i < 8; ++i) out.put(static_cast<char>(length >> (8 * i)));
  out << header << std::string(data_bytes, '\0');
  return path;
}

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

TEST(SafetensorsTest, RoundTripsEveryDTypeZeroSizeAndViews) {
  std::vector<Tensor> owned;
  std::vector<std::pair<std::string, const Tensor*>> tensors;
  int i = 0;
  for (DType dtype : kAllDTypes) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({3, 5}, dtype, 100 * i++));
    owned.push_back(t);
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor empty, Tensor::Zeros({0, 4}, DType::kFloat32));
  owned.push_back(empty);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor cols, owned[0].Narrow(1, 1, 3));  // non-contiguous
  owned.push_back(cols);
  for (size_t k = 0; k < owned.size(); ++k) {
    tensors.emplace_back("t" + std::to_string(k), &owned[k]);
  }
  const std::string path = testing::TestPath("roundtrip.safetensors");
  ASSERT_THAT(WriteFile(path, tensors, {{"format", "pt"}}), IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Reader reader, Reader::Open(path));
  EXPECT_EQ(reader.header().metadata.at("format"), "pt");
  ASSERT_EQ(reader.header().tensors.size(), owned.size());
  for (size_t k = 0; k < owned.size(); ++k) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor back, reader.ReadTensor("t" + std::to_string(k)));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor expected, owned[k].Contiguous());
    EXPECT_EQ(back.dtype(), expected.dtype());
    EXPECT_EQ(back.shape(), expected.shape());
    ASSERT_EQ(back.nbytes(), expected.nbytes());
    if (back.nbytes() > 0) {
      EXPECT_EQ(std::memcmp(back.data(), expected.data(), back.nbytes()), 0);
    }
  }
  // Header: 8-byte aligned, keys sorted (metadata first).
  std::string raw = ReadAll(path);
  uint64_t n = 0;
  for (int b = 7; b >= 0; --b) n = n << 8 | static_cast<unsigned char>(raw[b]);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(raw.substr(8, 16), "{\"__metadata__\":");
  EXPECT_THAT(reader.ReadTensor("nope"),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"nope\"")));
}

TEST(SafetensorsTest, WriteErrors) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Zeros({2}, DType::kInt8));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor meta, Tensor::Meta({2}, DType::kInt8));
  EXPECT_THAT(
      WriteFile(testing::TestPath("dup.safetensors"), {{"a", &t}, {"a", &t}}),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("duplicate tensor name \"a\"")));
  EXPECT_THAT(WriteFile(testing::TestPath("meta.safetensors"), {{"m", &meta}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("meta")));
  // As root, a path below a regular file is the reliable "cannot be written" (ENOTDIR).
  const std::string file = WriteRaw("plainfile", "{}", 0);
  EXPECT_THAT(WriteFile(file + "/x.safetensors", {{"a", &t}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("Not a directory")));
}

TEST(SafetensorsTest, WriterStreamsInNameOrder) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor a, Tensor::Arange({2, 3}, DType::kInt16));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor b, Tensor::Arange({4}, DType::kFloat64, 7));
  const std::string path = testing::TestPath("streamed.safetensors");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Writer writer,
                                Writer::Create(path, {{"b", DType::kFloat64, {4}, 0, 0},
                                                      {"a", DType::kInt16, {2, 3}, 0, 0}}));
  ASSERT_EQ(writer.tensors()[0].name, "a");
  EXPECT_THAT(writer.Append(b), StatusIs(absl::StatusCode::kFailedPrecondition,
                                         HasSubstr("tensor \"a\" expects I16[2, 3]")));
  EXPECT_THAT(writer.Commit(), StatusIs(absl::StatusCode::kFailedPrecondition,
                                        HasSubstr("2 tensors were never written")));
  ASSERT_THAT(writer.Append(a), IsOk());
  ASSERT_THAT(writer.Append(b), IsOk());
  ASSERT_THAT(writer.Commit(), IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Reader reader, Reader::Open(path));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor read, reader.ReadTensor("b"));
  EXPECT_EQ(std::memcmp(read.data(), b.data(), 32), 0);
  {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Writer abandoned,
                                  Writer::Create(testing::TestPath("abandoned.safetensors"), {}));
  }
  EXPECT_THAT(Reader::Open(testing::TestPath("abandoned.safetensors")),
              StatusIs(absl::StatusCode::kNotFound, _));
}

// The identity is the file's size and the SHA-256 of its first 8 + header-length bytes; a file
// resized, replaced or removed after opening is told apart from the one opened.
TEST(SafetensorsTest, IdentityAndChangesAfterOpening) {
  const std::string header = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const std::string path = WriteRaw("identity.safetensors", header, 8);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Reader reader, Reader::Open(path));
  const std::string bytes = ReadAll(path);
  EXPECT_EQ(reader.identity().size, bytes.size());
  EXPECT_EQ(reader.identity().header_digest,
            specs::Fingerprint(bytes.substr(0, 8 + header.size())));
  EXPECT_THAT(reader.CheckUnchanged(), IsOk());
  // Another header of the same length has another digest.
  const std::string other_header = R"({"w":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Reader other,
                                Reader::Open(WriteRaw("identity2.safetensors", other_header, 8)));
  EXPECT_NE(other.identity().header_digest, reader.identity().header_digest);
  // Replaced by a file of the same size: the file at the path is another one.
  ASSERT_EQ(std::rename(testing::TestPath("identity2.safetensors").c_str(), path.c_str()), 0);
  EXPECT_THAT(reader.CheckUnchanged(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("was replaced while open")));
  EXPECT_THAT(other.CheckUnchanged(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("was removed while open")));
  // Grown in place.
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Reader grown, Reader::Open(path));
  EXPECT_THAT(grown.CheckUnchanged(), IsOk());
  {
    std::ofstream out(path, std::ios::binary | std::ios::app);
    out << "yy";
  }
  EXPECT_THAT(grown.CheckUnchanged(),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("changed while open: it had " + std::to_string(bytes.size()) +
                                 " bytes, now " + std::to_string(bytes.size() + 2))));
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  EXPECT_THAT(Reader::Open(testing::TestPath("absent.safetensors")),
              StatusIs(absl::StatusCode::kNotFound, HasSubstr("no such file")));
}

struct BadCase {
  std::string name;
  std::string header;
  size_t data_bytes;
  std::string message;
};

TEST(SafetensorsTest, RejectsMalformedHeaders) {
  const std::string ok = R"("dtype":"F32","shape":[2],"data_offsets":[0,8])";
  const std::vector<BadCase> cases = {
      {"not_json", "{\"a\":", 0, "not valid JSON"},
      {"not_object", "[1,2]", 0, "not a safetensors file"},
      {"duplicate", "{\"a\":{" + ok + "},\"a\":{" + ok + "}}", 8, "duplicate key \"a\""},
      {"unknown_field", "{\"a\":{" + ok + ",\"x\":1}}", 8, "unknown field \"x\""},
      {"missing_field", R"({"a":{"dtype":"F32","shape":[2]}})", 8, "needs dtype, shape"},
      {"f4_odd_bits", R"({"a":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}})", 2,
       "12 bits, not a whole number of bytes"},
      {"f8_unknown", R"({"a":{"dtype":"F8_E3M4","shape":[2],"data_offsets":[0,2]}})", 2,
       "\"F8_E3M4\""},
      {"unknown_dtype", R"({"a":{"dtype":"Q4","shape":[2],"data_offsets":[0,2]}})", 2, "\"Q4\""},
      {"negative_dim", R"({"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8,
       "non-negative integer"},
      {"float_dim", R"({"a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", 8,
       "non-negative integer"},
      {"overflow", R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,8]}})",
       8, "overflows"},
      {"huge_number", R"({"a":{"dtype":"F32","shape":[1e400],"data_offsets":[0,8]}})", 8, ""},
      {"size_mismatch", R"({"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8,
       "hold 8 bytes but shape [3] of F32 needs 12"},
      {"reversed", R"({"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8, "hold 0 bytes"},
      {"beyond", R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8,
       "beyond the data region of 8 bytes"},
      {"overlap",
       R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
       8, "(overlap)"},
      {"gap", R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})", 8, "(gap)"},
      {"trailing", "{\"a\":{" + ok + "}}", 12, "tensors cover 8"},
      {"metadata_value", R"({"__metadata__":{"k":1}})", 0, "values must be strings"},
      {"deep", "{\"a\":" + std::string(80, '[') + std::string(80, ']') + "}", 0, "nesting deeper"},
      {"bad_utf8", "{\"a\xff\":1}", 0, "not valid JSON"},
  };
  for (const BadCase& c : cases) {
    std::string path = WriteRaw(c.name + ".safetensors", c.header, c.data_bytes);
    EXPECT_THAT(Reader::Open(path),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(c.message)))
        << c.name;
  }
}

// A checkpoint's tensor names are hostile input: messages quote them whole and escaped, cut only
// beyond 1 KiB with their length (core/base/quote.h), never at a fixed short width.
TEST(SafetensorsTest, ErrorsQuoteTensorNamesWholeUpToOneKiB) {
  const std::string long_name = "model.language_model.layers.12.self_attn.q_proj.weight";
  EXPECT_THAT(
      Reader::Open(WriteRaw(
          "long_name.safetensors",
          absl::StrCat(R"({")", long_name, R"(":{"dtype":"XX","shape":[1],"data_offsets":[0,1]}})"),
          1)),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr(absl::StrCat("tensor \"", long_name, "\""))));
  const std::string hostile = std::string(5000, 'a') + "\\u001b[2J";
  const absl::Status status =
      Reader::Open(WriteRaw("hostile_name.safetensors",
                            absl::StrCat(R"({")", hostile,
                                         R"(":{"dtype":"XX","shape":[1],"data_offsets":[0,1]}})"),
                            1))
          .status();
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kInvalidArgument,
                               HasSubstr(absl::StrCat("tensor \"", std::string(1024, 'a'),
                                                      "\"\u2026 (5004 bytes)"))));
  EXPECT_LT(status.message().size(), 1500u);
}

TEST(SafetensorsTest, RejectsTruncatedFiles) {
  EXPECT_THAT(Reader::Open(WriteRaw("short_header.safetensors", "{}", 0, 100)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("file is truncated: header length 100 but only 2 bytes follow")));
  EXPECT_THAT(Reader::Open(WriteRaw("truncated_data.safetensors",
                                    R"({"a":{"dtype":"I8","shape":[9],"data_offsets":[0,9]}})", 5)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("file truncated?")));
}

TEST(SafetensorsTest, SaysWhenAFileIsNotSafetensorsAtAll) {
  const std::string text = testing::TestPath("notes.txt");
  std::ofstream(text) << "plain text, long enough to look like a header length\n";
  EXPECT_THAT(Reader::Open(text),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("notes.txt: not a safetensors file (its 8-byte header length is "
                                 "followed by byte 0x78, not the '{'")));
  const std::string tiny = testing::TestPath("tiny.safetensors");
  std::ofstream(tiny) << "abc";
  EXPECT_THAT(Reader::Open(tiny), StatusIs(absl::StatusCode::kInvalidArgument,
                                           HasSubstr("not a safetensors file (3 bytes; the "
                                                     "smallest holds 10")));
  EXPECT_THAT(Reader::Open(WriteRaw("array.safetensors", "[]", 0)),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("not a safetensors file")));
  // '{' where it belongs, but a length past both the file's end and the limit: not a length.
  EXPECT_THAT(Reader::Open(WriteRaw("huge_header.safetensors", "{}", 0, 1ULL << 40)),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("not a safetensors file (its first 8 bytes give a header length "
                                 "of 1099511627776, more than the file's 10 bytes)")));
}

TEST(SafetensorsTest, RejectsAHeaderAboveTheLimitInALargeEnoughFile) {
  // A sparse file as long as its header claims: the limit, not the size, refuses it.
  const uint64_t length = kMaxHeaderBytes + 1;
  const std::string path = WriteRaw("over_limit.safetensors", "{}", 0, length);
  std::filesystem::resize_file(path, 8 + length);
  EXPECT_THAT(Reader::Open(path),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("header length 104857601 exceeds the limit of 104857600 bytes")));
}

TEST(SafetensorsTest, ReadsPartialRanges) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({16}, DType::kUInt8));
  const std::string path = testing::TestPath("partial.safetensors");
  ASSERT_THAT(WriteFile(path, {{"w", &t}}), IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Reader reader, Reader::Open(path));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const TensorInfo* info, reader.Find("w"));
  unsigned char out[4];
  ASSERT_THAT(reader.ReadBytes(*info, 6, 4, out), IsOk());
  EXPECT_THAT(out, ElementsAre(6, 7, 8, 9));
}

}  // namespace
}  // namespace shardkit::safetensors
