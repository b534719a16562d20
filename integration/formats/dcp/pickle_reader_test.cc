#include "integration/formats/pickle/pickle_reader.h"

#include <chrono>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/os/files.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/formats/dcp/test_util.h"
#include "testing/status_matchers.h"

namespace shardkit::dcp {

using ::shardkit::pickle::Pickle;
using ::shardkit::pickle::PickleGlobal;
using ::shardkit::pickle::PickleKind;
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::IsOkAndHolds;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;
using namespace std::string_literals;

constexpr auto kInvalid = absl::StatusCode::kInvalidArgument;

std::string Fixture(const std::string& name) {
  absl::StatusOr<std::string> bytes = os::ReadWholeFile(testing::FixturePath(name));
  EXPECT_THAT(bytes, IsOk());
  return bytes.ok() ? *bytes : std::string();
}

// A pickle written by hand: "\x80\x02" (PROTO 2), `body`, then STOP.
std::string Proto2(const std::string& body) { return "\x80\x02"s + body + "."; }

// data.pkl of torch.save(torch.arange(6.).reshape(2, 3)) in torch 2.15, opcode for opcode.
std::string RebuildV2Pickle() {
  return Proto2(
      "ctorch._utils\n_rebuild_tensor_v2\nq\x00"s
      "((X\x07\x00\x00\x00storageq\x01"s
      "ctorch\nFloatStorage\nq\x02"
      "X\x01\x00\x00\x00"s
      "0q\x03X\x03\x00\x00\x00"s
      "cpuq\x04K\x06tq\x05Q"
      "K\x00K\x02K\x03\x86q\x06K\x03K\x01\x86q\x07\x89"s
      "ccollections\nOrderedDict\nq\x08)Rq\ttq\nRq\x0b");
}

TEST(PickleReader, ReadsATensorRebuildAsTorchWritesIt) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Pickle pickle, Pickle::Parse(RebuildV2Pickle()));
  const Pickle::Id root = pickle.root();
  ASSERT_EQ(pickle.kind(root), PickleKind::kObject);
  EXPECT_EQ(pickle.global(root), PickleGlobal::kRebuildTensorV2);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      std::vector<Pickle::Id> args,
      pickle.ReduceArgs(root, PickleGlobal::kRebuildTensorV2, "tensor", 6));
  ASSERT_EQ(pickle.kind(args[0]), PickleKind::kPersistentId);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<Pickle::Id> pid,
                                pickle.Tuple(pickle.items(args[0])[0], "storage id", 5));
  EXPECT_THAT(pickle.Str(pid[0], "tag"), IsOkAndHolds("storage"));
  EXPECT_EQ(pickle.global(pid[1]), PickleGlobal::kTypedStorage);
  EXPECT_EQ(pickle.dtype(pid[1]), DType::kFloat32);
  EXPECT_THAT(pickle.Str(pid[2], "key"), IsOkAndHolds("0"));
  EXPECT_THAT(pickle.Int(pid[4], "numel"), IsOkAndHolds(6));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<Pickle::Id> shape, pickle.Tuple(args[2], "shape", 2));
  EXPECT_THAT(pickle.Int(shape[1], "dim"), IsOkAndHolds(3));
  EXPECT_THAT(pickle.Bool(args[4], "requires_grad"), IsOkAndHolds(false));
  EXPECT_EQ(pickle.global(args[5]), PickleGlobal::kOrderedDict);
}

TEST(PickleReader, ReadsAWholeMetadataFileAsTorchWritesIt) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Pickle pickle, Pickle::Parse(Fixture("basic/.metadata")));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<Pickle::Id> fields,
                                pickle.DataclassFields(pickle.root(), PickleGlobal::kMetadata,
                                                       {"state_dict_metadata", "planner_data",
                                                        "storage_data", "storage_meta", "version"},
                                                       "Metadata"));
  EXPECT_THAT(pickle.Str(fields[4], "version"), IsOkAndHolds("1.0.0"));
  EXPECT_EQ(pickle.kind(fields[0]), PickleKind::kDict);
  EXPECT_EQ(pickle.size(fields[0]), 11u);  // the fixture's state_dict keys
  EXPECT_EQ(pickle.size(fields[2]), 11u);  // one storage item per chunk or bytes item
}

TEST(PickleReader, IntegersFloatsAndStrings) {
  // [-2 (BININT), 300 (BININT2), -129 (LONG1, 2 bytes), 2^40 (LONG1), 1.5, "é", b"\x00\xff"]
  const std::string body =
      absl::StrCat("](J\xfe\xff\xff\xffM\x2c\x01\x8a\x02\x7f\xff\x8a\x06\x00\x00\x00\x00\x00\x01"s,
                   "G\x3f\xf8\x00\x00\x00\x00\x00\x00\x8c\x02\xc3\xa9"s, "C\x02\x00\xff"s, "e");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Pickle pickle, Pickle::Parse(Proto2(body)));
  const std::vector<Pickle::Id> items = pickle.items(pickle.root());
  ASSERT_EQ(items.size(), 7u);
  EXPECT_EQ(pickle.int_value(items[0]), -2);
  EXPECT_EQ(pickle.int_value(items[1]), 300);
  EXPECT_EQ(pickle.int_value(items[2]), -129);
  EXPECT_EQ(pickle.int_value(items[3]), int64_t{1} << 40);
  EXPECT_EQ(pickle.float_value(items[4]), 1.5);
  EXPECT_EQ(pickle.text(items[5]), "\xc3\xa9");
  EXPECT_EQ(pickle.text(items[6]), "\x00\xff"s);
}

TEST(PickleReader, ForbiddenGlobalsNameTheGlobalAndOffset) {
  EXPECT_THAT(Pickle::Parse(Proto2("cos\nsystem\nX\x02\x00\x00\x00id\x85R"s)),
              StatusIs(kInvalid, HasSubstr("pickle byte 2: global \"os.system\" is not allowed")));
  // STACK_GLOBAL, as protocol 4 writes it.
  EXPECT_THAT(Pickle::Parse("\x80\x04\x8c\x08"
                            "builtins\x8c\x04"
                            "eval\x93."),
              StatusIs(kInvalid, HasSubstr("pickle byte 18: global \"builtins.eval\"")));
  // A torch name outside the allow-list, and a dtype without a shardkit DType.
  EXPECT_THAT(Pickle::Parse(Proto2("ctorch\nload\n")),
              StatusIs(kInvalid, HasSubstr("\"torch.load\" is not allowed")));
  EXPECT_THAT(Pickle::Parse(Proto2("ctorch\ncomplex128\n")),
              StatusIs(kInvalid, HasSubstr("\"torch.complex128\" is not allowed")));
}

TEST(PickleReader, AllowedGlobalsOnlyTheWayTorchUsesThem) {
  // A dtype is a value: calling it is refused, as is NEWOBJ of a REDUCE class and the reverse.
  EXPECT_THAT(Pickle::Parse(Proto2("ctorch\nfloat32\n)R")),
              StatusIs(kInvalid, HasSubstr("pickle byte 18: REDUCE of a global torch.float32")));
  EXPECT_THAT(Pickle::Parse(Proto2("ctorch\nSize\n)\x81")),
              StatusIs(kInvalid, HasSubstr("NEWOBJ of a global torch.Size")));
  EXPECT_THAT(Pickle::Parse(Proto2("ctorch.distributed.checkpoint.metadata\nStorageMeta\n)R")),
              StatusIs(kInvalid, HasSubstr("REDUCE of a global "
                                           "torch.distributed.checkpoint.metadata.StorageMeta")));
  // BUILD only on dataclasses, once.
  EXPECT_THAT(Pickle::Parse(Proto2("ctorch\nSize\n)R}b")),
              StatusIs(kInvalid, HasSubstr("BUILD of a torch.Size object")));
  EXPECT_THAT(
      Pickle::Parse(Proto2("ctorch.distributed.checkpoint.metadata\nStorageMeta\n)\x81}b}b")),
      StatusIs(kInvalid, HasSubstr("a second BUILD")));
}

TEST(PickleReader, UnknownOpcodes) {
  // INST ('i') runs a class by name in protocol 0; 0xff is no opcode at all.
  EXPECT_THAT(Pickle::Parse(Proto2("(ios\nsystem\n")),
              StatusIs(kInvalid, HasSubstr("pickle byte 3: opcode 0x69 ('i') is not one")));
  EXPECT_THAT(Pickle::Parse(Proto2("\xff")),
              StatusIs(kInvalid, HasSubstr("pickle byte 2: opcode 0xff is not one")));
  EXPECT_THAT(Pickle::Parse("N."), StatusIs(kInvalid, HasSubstr("first opcode 0x4e ('N')")));
  EXPECT_THAT(Pickle::Parse("\x80\x01N."), StatusIs(kInvalid, HasSubstr("pickle protocol 1")));
}

TEST(PickleReader, MemoCyclesAreRefused) {
  // l = []; l.append(l)
  EXPECT_THAT(Pickle::Parse(Proto2("]q\x00h\x00"s
                                   "a")),
              StatusIs(kInvalid, HasSubstr("pickle byte 7: a memo cycle: the list of 0 made at "
                                           "byte 2 is changed after it was put inside")));
  // d = {}; d["k"] = [d] (the dict inside a list, then changed).
  EXPECT_THAT(Pickle::Parse(Proto2("}q\x00X\x01\x00\x00\x00k]h\x00"s
                                   "as")),
              StatusIs(kInvalid, HasSubstr("a memo cycle: the dict of 0")));
  // A dataclass whose state holds itself.
  EXPECT_THAT(
      Pickle::Parse(Proto2("ctorch.distributed.checkpoint.metadata\nStorageMeta\n)\x81q\x00"s
                           "}X\x07\x00\x00\x00modulesh\x00sb"s)),
      StatusIs(kInvalid, HasSubstr("a memo cycle: the "
                                   "torch.distributed.checkpoint.metadata.StorageMeta object")));
  // Sharing without a cycle is fine: [x, x] for one memoized list x.
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Pickle shared, Pickle::Parse(Proto2("](]q\x00h\x00"s
                                                                    "e")));
  const std::vector<Pickle::Id> items = shared.items(shared.root());
  ASSERT_EQ(items.size(), 2u);
  EXPECT_EQ(items[0], items[1]);
}

TEST(PickleReader, EveryTruncationOfARealMetadataIsRefused) {
  const std::string bytes = Fixture("basic/.metadata");
  ASSERT_FALSE(bytes.empty());
  for (size_t length = 0; length < bytes.size(); ++length) {
    absl::StatusOr<Pickle> pickle = Pickle::Parse(std::string_view(bytes).substr(0, length));
    ASSERT_FALSE(pickle.ok()) << length;
    ASSERT_EQ(pickle.status().code(), kInvalid) << length << ": " << pickle.status();
  }
  EXPECT_THAT(Pickle::Parse(bytes.substr(0, 100)),
              StatusIs(kInvalid, HasSubstr("pickle byte 2: truncated: FRAME needs")));
  EXPECT_THAT(Pickle::Parse(bytes + "N"), StatusIs(kInvalid, HasSubstr("1 bytes after STOP")));
}

TEST(PickleReader, AbsurdSizesAreRefusedWithoutAllocating) {
  // BINUNICODE8 / BINBYTES8 of 2^62 bytes, a FRAME of 2^63, LONG4 of 2^31 bytes.
  EXPECT_THAT(Pickle::Parse(Proto2("\x8d\x00\x00\x00\x00\x00\x00\x00\x40"s)),
              StatusIs(kInvalid, HasSubstr("truncated: a str needs 4611686018427387904 bytes")));
  EXPECT_THAT(Pickle::Parse(Proto2("\x8e\x00\x00\x00\x00\x00\x00\x00\x40"s)),
              StatusIs(kInvalid, HasSubstr("truncated: a bytes needs")));
  EXPECT_THAT(Pickle::Parse(Proto2("\x95\x00\x00\x00\x00\x00\x00\x00\x80"s)),
              StatusIs(kInvalid, HasSubstr("truncated: FRAME needs 9223372036854775808 bytes")));
  EXPECT_THAT(Pickle::Parse(Proto2("\x8b\x00\x00\x00\x80"s)),
              StatusIs(kInvalid, HasSubstr("an integer of 2147483648 bytes")));
  EXPECT_THAT(Pickle::Parse(Proto2("\x8a\x09\x00\x00\x00\x00\x00\x00\x00\x00\x01"s)),
              StatusIs(kInvalid, HasSubstr("an integer of 9 bytes (at most 8 are read)")));
}

TEST(PickleReader, StackMarkAndMemoMisuse) {
  EXPECT_THAT(Pickle::Parse(Proto2("a")), StatusIs(kInvalid, HasSubstr("stack empty")));
  EXPECT_THAT(Pickle::Parse(Proto2("Nt")), StatusIs(kInvalid, HasSubstr("no MARK before it")));
  EXPECT_THAT(Pickle::Parse(Proto2("(N")), StatusIs(kInvalid, HasSubstr("STOP inside a MARK")));
  EXPECT_THAT(Pickle::Parse(Proto2("NN")), StatusIs(kInvalid, HasSubstr("2 values on the stack")));
  EXPECT_THAT(Pickle::Parse(Proto2("h\x05")),
              StatusIs(kInvalid, HasSubstr("memo index 5 was never set (0 are)")));
  EXPECT_THAT(Pickle::Parse(Proto2("Nq\x03")),
              StatusIs(kInvalid, HasSubstr("memo index 3 out of order (next is 0)")));
  EXPECT_THAT(Pickle::Parse(Proto2("(NNNu")),
              StatusIs(kInvalid, HasSubstr("SETITEMS with an odd number")));
  EXPECT_THAT(Pickle::Parse(Proto2("]Na")), IsOk());
  EXPECT_THAT(Pickle::Parse(Proto2("NNa")), StatusIs(kInvalid, HasSubstr("APPEND to a None")));
  EXPECT_THAT(Pickle::Parse(Proto2("X\x02\x00\x00\x00\xc3\x28"s)),
              StatusIs(kInvalid, HasSubstr("a str that is not UTF-8")));
  EXPECT_THAT(Pickle::Parse(Proto2("X\x03\x00\x00\x00\xed\xa0\x80"s)),  // a lone surrogate
              StatusIs(kInvalid, HasSubstr("a str that is not UTF-8")));
}

// A million memo references to one value cost a reference each: values are shared, not copied.
TEST(PickleReader, MillionsOfMemoReferencesStayLinear) {
  std::string body = "](ctorch.distributed.checkpoint.metadata\nChunkStorageMetadata\n)\x81q\x00"s;
  constexpr int kCount = 1000000;
  body.reserve(body.size() + 2 * kCount + 4);
  for (int i = 1; i < kCount; ++i) body += "h\x00"s;
  body += "e";
  const auto start = std::chrono::steady_clock::now();
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Pickle pickle, Pickle::Parse(Proto2(body)));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(pickle.size(pickle.root()), static_cast<size_t>(kCount));
  EXPECT_LE(pickle.value_count(), 4u);  // the class, its args, the object, the list
  EXPECT_LT(seconds, 10.0);
}

}  // namespace
}  // namespace shardkit::dcp
