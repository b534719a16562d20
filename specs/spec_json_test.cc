// Strict parsing (each error's path text), canonical and bound forms, equality.
#include "specs/spec_json.h"

#include "core/json/json_reader.h"
#include "specs/fingerprint.h"
#include "testing/status_matchers.h"

namespace shardkit::specs {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

void ExpectError(std::string_view json, std::string_view message) {
  EXPECT_THAT(ParseSpec(json),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(std::string(message))))
      << json;
}

TEST(ParseSpecTest, ChunkEnumerableAndShorthand) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec chunk,
      ParseSpec(R"({"type": "chunk", "dim": 0, "placements": ["rank:0/cpu", "rank:1"]})"));
  EXPECT_EQ(
      chunk,
      ShardingSpec(ChunkShardingSpec{
          0, std::vector<Placement>{Placement::ForRank(0, Device::Cpu()), Placement::ForRank(1)}}));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec shorthand,
      ParseSpec(
          R"({"type":"chunk","dim":1,"placements":{"ranks":"all","device":"cpu"},"version":1})"));
  EXPECT_EQ(shorthand,
            ShardingSpec(ChunkShardingSpec{1, PlacementShorthand{AllRanks{}, Device::Cpu()}}));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardingSpec enumerable, ParseSpec(R"({"type": "enumerable",
      "shards": [{"offsets": [0, 0], "sizes": [5, 5], "placement": "rank:0/cpu"},
                 {"offsets": [5, 0], "sizes": [5, 5], "placement": "rank:1/cpu"}]})"));
  EXPECT_EQ(std::get<EnumerableShardingSpec>(enumerable).shards.size(), 2u);
}

TEST(ParseSpecTest, SyntaxErrorsHaveLineAndColumn) {
  ExpectError("{\"type\": \"chunk\",\n \"dim\": NaN}",
              "invalid JSON: parse error at line 2, column");
  ExpectError("{\"dim\": Infinity}", "invalid JSON: parse error at line 1, column");
  ExpectError("{\"dim\": -Infinity}", "invalid JSON: parse error");
  ExpectError("{\"type\": \"chunk\"", "invalid JSON: parse error at line 1, column 17");
  ExpectError("{\"type\": \"ch\xff\"}", "ill-formed UTF-8");
  ExpectError("", "invalid JSON: parse error at line 1, column 1");
  ExpectError("{\"dim\": 1e999}",
              "invalid JSON: parse error at line 1, column 13: number overflow");
  ExpectError("{} {}", "invalid JSON: parse error");
}

TEST(ParseSpecTest, StructuralErrorsNameThePath) {
  ExpectError("[]", "top level: expected spec object, got array");
  ExpectError(R"({"dim": 0})", "top level: missing key \"type\"");
  ExpectError(R"({"type": 1})", "type: expected string, got 1");
  ExpectError(R"({"type": "grid"})", "type: expected \"chunk\" or \"enumerable\", got \"grid\"");
  ExpectError(R"({"type": "chunk", "dim": 0, "placements": ["rank:0"], "dims": 1})",
              "top level: unknown key \"dims\" (expected align, dim, placements, type, version)");
  ExpectError(R"({"type": "chunk", "dim": 0, "dim": 1, "placements": ["rank:0"]})",
              "top level: duplicate key \"dim\"");
  ExpectError(R"({"type": "chunk", "placements": ["rank:0"]})", "top level: missing key \"dim\"");
  ExpectError(R"({"type": "chunk", "dim": "x", "placements": ["rank:0"]})",
              "dim: expected integer, got \"x\"");
  ExpectError(R"({"type": "chunk", "dim": 1.0, "placements": ["rank:0"]})",
              "dim: expected integer, got 1.0");
  ExpectError(R"({"type": "chunk", "dim": true, "placements": ["rank:0"]})",
              "dim: expected integer, got true");
  ExpectError(R"({"type": "chunk", "dim": 99999999999999999999, "placements": ["rank:0"]})",
              "dim: expected integer, got 1e+20");
  ExpectError(R"({"type": "chunk", "dim": 18446744073709551615, "placements": ["rank:0"]})",
              "dim: integer 18446744073709551615 does not fit in 64 bits");
  ExpectError(R"({"type": "chunk", "dim": 0, "placements": []})", "placements: must not be empty");
  ExpectError(R"({"type": "chunk", "dim": 0, "placements": "rank:0"})",
              "placements: expected a list of placements or {\"ranks\": ..., \"device\": ...}, "
              "got \"rank:0\"");
  ExpectError(R"({"type": "chunk", "dim": 0, "placements": ["rank:0", "worker1/cpu"]})",
              "placements[1]: invalid placement \"worker1/cpu\"");
  ExpectError(R"({"type": "chunk", "dim": 0, "placements": ["rank:0", 1]})",
              "placements[1]: expected string, got 1");
  ExpectError(R"({"type": "chunk", "dim": 0, "placements": ["rank:0"], "version": 2})",
              "version: unsupported version 2 (expected 1)");
}

TEST(ParseSpecTest, Align) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec aligned,
      ParseSpec(R"({"type": "chunk", "dim": 0, "align": 128, "placements": {"ranks": "all"}})"));
  EXPECT_EQ(std::get<ChunkShardingSpec>(aligned).align, 128);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec plain, ParseSpec(R"({"type": "chunk", "dim": 0, "placements": ["rank:0"]})"));
  EXPECT_EQ(std::get<ChunkShardingSpec>(plain).align, 1);

  const auto with = [](std::string_view align) {
    return absl::StrCat(R"({"type": "chunk", "dim": 0, "placements": ["rank:0"], "align": )",
                        absl::string_view(align.data(), align.size()), "}");
  };
  ExpectError(with("0"), "align: expected a positive integer, got 0");
  ExpectError(with("-128"), "align: expected a positive integer, got -128");
  ExpectError(with("1.5"), "align: expected a positive integer, got 1.5");
  ExpectError(with("128.0"), "align: expected a positive integer, got 128.0");
  ExpectError(with(R"("128")"), "align: expected a positive integer, got \"128\"");
  ExpectError(with("true"), "align: expected a positive integer, got true");
  ExpectError(with("null"), "align: expected a positive integer, got null");
  ExpectError(with("18446744073709551615"),
              "align: expected a positive integer, got 18446744073709551615");
  // Only chunk specs are aligned.
  ExpectError(R"({"type": "enumerable", "align": 2, "shards": [
                  {"offsets": [0], "sizes": [4], "placement": "rank:0"}]})",
              "top level: unknown key \"align\" (expected shards, type, version)");
}

TEST(ParseSpecTest, ShorthandErrors) {
  const auto with = [](std::string_view placements) {
    return absl::StrCat(R"({"type": "chunk", "dim": 0, "placements": )",
                        absl::string_view(placements.data(), placements.size()), "}");
  };
  ExpectError(with(R"({"device": "cpu"})"), "placements: missing key \"ranks\"");
  ExpectError(with(R"({"ranks": "all", "devices": "cpu"})"),
              "placements: unknown key \"devices\" (expected device, ranks)");
  ExpectError(with(R"({"ranks": "some"})"),
              "placements.ranks: expected \"all\", \"a..b\" (ranks a <= b) or a list of ranks, got "
              "\"some\"");
  ExpectError(with(R"({"ranks": "3..1"})"), "placements.ranks: expected \"all\"");
  ExpectError(with(R"({"ranks": "01..3"})"), "placements.ranks: expected \"all\"");
  ExpectError(with(R"({"ranks": []})"), "placements.ranks: must not be empty");
  ExpectError(with(R"({"ranks": [0, -1]})"), "placements.ranks[1]: rank -1 is outside");
  ExpectError(with(R"({"ranks": [0, 0.5]})"), "placements.ranks[1]: expected integer, got 0.5");
  ExpectError(with(R"({"ranks": 3})"), "placements.ranks: expected \"all\", \"a..b\" or a list");
  ExpectError(with(R"({"ranks": "all", "device": "meta"})"),
              "placements.device: invalid device \"meta\"");
}

TEST(ParseSpecTest, EnumerableErrors) {
  // Overlap needs no shape: it is rejected at parse time, naming both shards.
  ExpectError(
      R"({"type": "enumerable", "shards": [
          {"offsets": [0, 0], "sizes": [3, 3], "placement": "rank:0/cpu"},
          {"offsets": [2, 0], "sizes": [3, 3], "placement": "rank:1/cpu"}]})",
      "shards 0 (offsets [0, 0], sizes [3, 3], rank:0/cpu) and 1 (offsets [2, 0], sizes [3, 3], "
      "rank:1/cpu) overlap");
  // Touching shards and a zero-size shard inside another do not overlap.
  SHARDKIT_EXPECT_OK(ParseSpec(R"({"type": "enumerable", "shards": [
      {"offsets": [0, 0], "sizes": [2, 3], "placement": "rank:0"},
      {"offsets": [2, 0], "sizes": [3, 3], "placement": "rank:1"},
      {"offsets": [1, 1], "sizes": [0, 1], "placement": "rank:1"}]})")
                         .status());
  ExpectError(R"({"type": "enumerable", "shards": []})", "shards: must not be empty");
  ExpectError(R"({"type": "enumerable", "shards": {}})",
              "shards: expected array of shards, got object");
  ExpectError(R"({"type": "enumerable", "dim": 0, "shards": []})",
              "top level: unknown key \"dim\" (expected shards, type, version)");
  ExpectError(
      R"({"type": "enumerable", "shards": [{"offsets": [0], "sizes": [4], "placement": "rank:0"},
          {"offsets": [0], "sizes": [4]}]})",
      "shards[1]: missing key \"placement\"");
  ExpectError(
      R"({"type": "enumerable", "shards": [{"offsets": [0, "a"], "sizes": [4, 1], "placement": "rank:0"}]})",
      "shards[0].offsets[1]: expected integer, got \"a\"");
  ExpectError(
      R"({"type": "enumerable", "shards": [{"offsets": [0], "sizes": [-4], "placement": "rank:0"}]})",
      "shards[0]: sizes must be >= 0, found sizes [-4]");
  ExpectError(
      R"({"type": "enumerable", "shards": [{"offsets": [0], "sizes": [4, 4], "placement": "rank:0"}]})",
      "shards[0]: offsets and sizes must have the same number of elements");
  ExpectError(
      R"({"type": "enumerable", "shards": [{"offsets": [0], "sizes": [4], "placement": "rank:0"},
          {"offsets": [0, 0], "sizes": [4, 4], "placement": "rank:1"}]})",
      "shards[1] has 2 dims but shards[0] has 1");
  ExpectError(
      R"({"type": "enumerable", "shards": [{"offsets": [0], "sizes": [4], "placement": "rank:0", "x": 1}]})",
      "shards[0]: unknown key \"x\" (expected offsets, placement, sizes)");
  ExpectError(
      R"({"type": "enumerable", "shards": [{"offsets": [0], "sizes": [4], "sizes": [4], "placement": "rank:0"}]})",
      "shards[0]: duplicate key \"sizes\"");
}

TEST(ParseSpecTest, HostileInputsFailCleanly) {
  ExpectError(std::string(100000, '['), "JSON nesting deeper than 64 levels");
  ExpectError(R"({"type": "chunk", "dim": 0, "placements": [")" + std::string(1000, 'x') + R"("]})",
              "placements[0]: invalid placement \"" + std::string(64, 'x') + "...\": must start");
}

TEST(CanonicalTest, SortedCompactVersionedAsWritten) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec spec,
      ParseSpec(R"({ "placements" : ["rank:1/cpu", "rank:0"], "dim" : -1, "type" : "chunk" })"));
  const std::string canonical = CanonicalJson(spec);
  EXPECT_EQ(canonical,
            R"({"dim":-1,"placements":["rank:1/cpu","rank:0"],"type":"chunk","version":1})");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardingSpec again, ParseSpec(canonical));
  EXPECT_EQ(CanonicalJson(again), canonical);
  EXPECT_EQ(
      CanonicalJson(
          *ParseSpec(R"({"type":"chunk","dim":0,"placements":{"ranks":[2,0],"device":"cuda:1"}})")),
      R"({"dim":0,"placements":{"device":"cuda:1","ranks":[2,0]},"type":"chunk","version":1})");
  EXPECT_EQ(CanonicalJson(*ParseSpec(R"({"type":"chunk","dim":0,"placements":{"ranks":"0..3"}})")),
            R"({"dim":0,"placements":{"ranks":"0..3"},"type":"chunk","version":1})");
}

// Enumerable specs are written without a DOM: the bytes must still be json::Dump's.
TEST(CanonicalTest, EnumerableTextIsTheDumpOfItsJson) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardingSpec spec, ParseSpec(R"({"type": "enumerable", "shards": [
          {"sizes": [3, 8], "offsets": [0, 0], "placement": "rank:1/cuda:12"},
          {"offsets": [3, 0], "placement": "rank:0/cpu", "sizes": [0, 8]},
          {"placement": "rank:10", "offsets": [3, 0], "sizes": [7, 8]}]})"));
  const std::string canonical = CanonicalJson(spec);
  EXPECT_EQ(canonical,
            R"({"shards":[{"offsets":[0,0],"placement":"rank:1/cuda:12","sizes":[3,8]},)"
            R"({"offsets":[3,0],"placement":"rank:0/cpu","sizes":[0,8]},)"
            R"({"offsets":[3,0],"placement":"rank:10","sizes":[7,8]}],"type":"enumerable",)"
            R"("version":1})");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(json::Json parsed, json::ParseJson(canonical));
  EXPECT_EQ(json::Dump(parsed), canonical);
}

// align is in the canonical form only when it is not 1: specs written without it (and with
// "align": 1) keep the bytes and fingerprints they had before align existed.
TEST(CanonicalTest, AlignOnlyWhenNotOne) {
  constexpr char kPlain[] =
      R"({"dim":0,"placements":["rank:0","rank:1"],"type":"chunk","version":1})";
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec one,
      ParseSpec(R"({"type":"chunk","dim":0,"align":1,"placements":["rank:0","rank:1"]})"));
  EXPECT_EQ(CanonicalJson(one), kPlain);
  EXPECT_EQ(CanonicalJson(*ParseSpec(kPlain)), kPlain);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec aligned,
      ParseSpec(R"({"type":"chunk","dim":-2,"align":128,"placements":{"ranks":"all"}})"));
  EXPECT_EQ(CanonicalJson(aligned),
            R"({"align":128,"dim":-2,"placements":{"ranks":"all"},"type":"chunk","version":1})");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::string bound, BoundCanonicalJson(aligned, {300, 256}, 2));
  EXPECT_EQ(bound,
            R"({"align":128,"dim":0,"placements":["rank:0","rank:1"],"type":"chunk","version":1})");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ShardingSpec again, ParseSpec(bound));
  EXPECT_EQ(CanonicalJson(again), bound);  // fixed point
  EXPECT_NE(Fingerprint(bound), Fingerprint(kPlain));
}

TEST(CanonicalTest, BoundFormAndEquality) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec negative,
      ParseSpec(R"({"type":"chunk","dim":-1,"placements":{"ranks":"all","device":"cpu"}})"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      ShardingSpec positive,
      ParseSpec(R"({"type":"chunk","dim":1,"placements":["rank:0/cpu","rank:1/cpu"]})"));
  // Unlike PyTorch, dim -1 and dim 1 on a 2-d tensor are the same bound layout.
  EXPECT_NE(CanonicalJson(negative), CanonicalJson(positive));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::string a, BoundCanonicalJson(negative, {4, 6}, 2));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::string b, BoundCanonicalJson(positive, {4, 6}, 2));
  EXPECT_EQ(a, R"({"dim":1,"placements":["rank:0/cpu","rank:1/cpu"],"type":"chunk","version":1})");
  EXPECT_EQ(a, b);
  EXPECT_EQ(Fingerprint(a), Fingerprint(b));
  // On a 3-d tensor they differ.
  EXPECT_NE(*BoundCanonicalJson(negative, {4, 6, 2}, 2),
            *BoundCanonicalJson(positive, {4, 6, 2}, 2));
  // "rank:0" and "rank:0/cpu" are different as written.
  EXPECT_NE(*BoundCanonicalJson(*ParseSpec(R"({"type":"chunk","dim":0,"placements":["rank:0"]})"),
                                {4}, 1),
            *BoundCanonicalJson(
                *ParseSpec(R"({"type":"chunk","dim":0,"placements":["rank:0/cpu"]})"), {4}, 1));
}

TEST(FingerprintTest, KnownVectors) {
  EXPECT_EQ(Fingerprint(""),
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(Fingerprint("abc"),
            "sha256:ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

}  // namespace
}  // namespace shardkit::specs
