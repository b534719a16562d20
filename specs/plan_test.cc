// Plans: parsing errors with paths, pattern matching, first match wins, Resolve, layouts.
#include "specs/plan.h"

#include "absl/strings/str_cat.h"
#include "specs/fingerprint.h"
#include "specs/parameter_layout.h"
#include "specs/pattern.h"
#include "testing/status_matchers.h"

namespace shardkit::specs {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

constexpr char kPlan[] = R"({"version": 1, "src_rank": 0, "strategy": "scatter", "rules": [
  {"match": "layers.*.attn.qkv.weight",
   "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0/cpu", "rank:1/cpu"]}},
  {"match": "embed.weight",
   "spec": {"type": "chunk", "dim": 1, "placements": ["rank:1/cpu", "rank:0/cpu"]}},
  {"match": "**.bias", "spec": {"type": "chunk", "dim": 0, "placements": {"ranks": "all"}}}]})";

TEST(PatternTest, Matching) {
  EXPECT_TRUE(MatchesPattern("layers.*.attn.qkv.weight", "layers.3.attn.qkv.weight"));
  EXPECT_FALSE(MatchesPattern("layers.*.attn.qkv.weight", "layers.3.4.attn.qkv.weight"));
  EXPECT_FALSE(MatchesPattern("layers.*.weight", "xlayers.1.weight"));  // whole name only
  EXPECT_FALSE(MatchesPattern("embed", "embed.weight"));
  EXPECT_TRUE(MatchesPattern("*", "weight"));
  EXPECT_FALSE(MatchesPattern("*", "a.weight"));
  EXPECT_TRUE(MatchesPattern("**", "a.b.c"));
  EXPECT_TRUE(MatchesPattern("**.weight", "weight"));
  EXPECT_TRUE(MatchesPattern("**.weight", "a.b.weight"));
  EXPECT_FALSE(MatchesPattern("**.weight", "a.b.weight2"));
  EXPECT_TRUE(MatchesPattern("a.**", "a"));
  EXPECT_TRUE(MatchesPattern("a.**.z", "a.z"));
  EXPECT_TRUE(MatchesPattern("a.**.z", "a.b.c.z"));
  EXPECT_TRUE(MatchesPattern("layer*.w*ght", "layers.weight"));
  EXPECT_TRUE(MatchesPattern("layer*.w*ght", "layer.wght"));
  EXPECT_TRUE(MatchesPattern("a.*.c", "a..c"));
  EXPECT_TRUE(MatchesPattern("x?y[1]", "x?y[1]"));  // literal
  EXPECT_FALSE(MatchesPattern("x?y", "xzy"));
  EXPECT_THAT(ValidatePattern("a**.b"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("\"**\" must be a whole dotted segment")));
  EXPECT_THAT(ValidatePattern("***"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("found segment \"***\"")));
  EXPECT_THAT(ValidatePattern(""),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("must not be empty")));
  EXPECT_THAT(ValidatePattern("**.a.**"), IsOk());
}

TEST(PlanTest, ParsesAndMatchesFirstRuleWins) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(kPlan));
  EXPECT_EQ(plan.rules.size(), 3u);
  EXPECT_EQ(MatchRule(plan, "layers.0.attn.qkv.weight"), 0u);
  EXPECT_EQ(MatchRule(plan, "embed.weight"), 1u);
  EXPECT_EQ(MatchRule(plan, "layers.0.attn.qkv.bias"), 2u);
  EXPECT_EQ(MatchRule(plan, "norm.weight"), std::nullopt);
  plan.rules.insert(plan.rules.begin(), PlanRule{"**", plan.rules[1].spec});
  EXPECT_EQ(MatchRule(plan, "embed.weight"), 0u);
}

TEST(PlanTest, DefaultsAndCanonicalForm) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      Plan plan, ParsePlan(R"({"rules": [{"spec": {"type": "chunk", "placements": ["rank:0"],
                                         "dim": 0}, "match": "w"}]})"));
  EXPECT_EQ(plan.src_rank, 0);
  EXPECT_EQ(plan.strategy, Strategy::kScatter);
  const std::string canonical = CanonicalJson(plan);
  EXPECT_EQ(canonical,
            R"({"rules":[{"match":"w","spec":{"dim":0,"placements":["rank:0"],"type":"chunk",)"
            R"("version":1}}],"src_rank":0,"strategy":"scatter","version":1})");
  EXPECT_EQ(CanonicalJson(*ParsePlan(canonical)), canonical);
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      Plan broadcast, ParsePlan(R"({"rules": [], "src_rank": 2, "strategy": "broadcast"})"));
  EXPECT_EQ(CanonicalJson(broadcast),
            R"({"rules":[],"src_rank":2,"strategy":"broadcast","version":1})");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan direct, ParsePlan(R"({"rules": [], "strategy": "direct"})"));
  EXPECT_EQ(direct.strategy, Strategy::kDirect);
  EXPECT_EQ(CanonicalJson(direct), R"({"rules":[],"src_rank":0,"strategy":"direct","version":1})");
  // "reshard" is recorded in index.json, never a plan's.
  EXPECT_THAT(ParsePlan(R"({"rules": [], "strategy": "reshard"})"),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("strategy: expected \"scatter\", \"broadcast\" or "
                                 "\"direct\", got \"reshard\"")));
  for (Strategy s : {Strategy::kScatter, Strategy::kBroadcast, Strategy::kDirect}) {
    EXPECT_THAT(ParseStrategy(StrategyName(s)), ::shardkit::testing::IsOkAndHolds(s));
  }
  // "save" (SaveShards) is recorded too, never a plan's.
  EXPECT_THAT(ParsePlan(R"({"rules": [], "strategy": "save"})"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("got \"save\"")));
}

TEST(PlanTest, ParseErrorsNameThePath) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"rules": [{"match": "a", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"]}},
                     {"match": "b", "spec": {"type": "chunk", "dim": "x", "placements": ["rank:0"]}}]})",
       "rules[1].spec.dim: expected integer, got \"x\""},
      {R"({"rules": {}})", "rules: expected array of rules, got object"},
      {R"({"src_rank": 0})", "top level: missing key \"rules\""},
      {R"({"rules": [], "strategy": "gather"})",
       "strategy: expected \"scatter\", \"broadcast\" or \"direct\", got \"gather\""},
      {R"({"rules": [], "src_rank": -1})", "src_rank: rank -1 is outside"},
      {R"({"rules": [], "src_rank": 0.0})", "src_rank: expected integer, got 0.0"},
      {R"({"rules": [], "version": 3})", "version: unsupported version 3"},
      {R"({"rules": [], "extra": 1})",
       "top level: unknown key \"extra\" (expected rules, src_rank, strategy, version)"},
      {R"({"rules": [], "rules": []})", "top level: duplicate key \"rules\""},
      {R"({"rules": [{"match": "a"}]})", "rules[0]: missing key \"spec\""},
      {R"({"rules": [{"match": 5, "spec": {}}]})", "rules[0].match: expected string, got 5"},
      {R"({"rules": [{"match": "a**", "spec": {}}]})",
       "rules[0].match: \"**\" must be a whole dotted segment"},
      {R"({"rules": [{"match": "a", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"],
          "dim": 1}}]})",
       "rules[0].spec: duplicate key \"dim\""},
      {R"({"rules": [{"match": "a", "spec": {"type": "enumerable", "shards": [
          {"offsets": [0], "sizes": [1], "placement": "rank:x"}]}}]})",
       "rules[0].spec.shards[0].placement: invalid placement \"rank:x\""},
      {R"({"rules": [{"match": "a", "spec": [1]}]})",
       "rules[0].spec: expected spec object, got array"},
      {R"({"rules": [{"match": "a", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"],
          "align": 0}}]})",
       "rules[0].spec.align: expected a positive integer, got 0"},
  };
  for (const auto& [json, message] : cases) {
    EXPECT_THAT(ParsePlan(json), StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(message)))
        << json;
  }
}

TEST(PlanTest, SpecOrPlanIsRecognisedByRules) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(SpecOrPlan plan, ParseSpecOrPlan(kPlan));
  EXPECT_TRUE(std::holds_alternative<Plan>(plan));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      SpecOrPlan spec, ParseSpecOrPlan(R"({"type":"chunk","dim":0,"placements":["rank:0"]})"));
  EXPECT_TRUE(std::holds_alternative<ShardingSpec>(spec));
}

TEST(ResolveTest, PerParameterLayouts) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(kPlan));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      std::vector<ResolvedParameter> resolved,
      Resolve(plan, {{"embed.weight", {10, 8}}, {"norm.weight", {4}}, {"fc.bias", {5}}}, 3));
  ASSERT_EQ(resolved.size(), 3u);
  const ParameterLayout& embed = resolved[0].layout;
  EXPECT_EQ(resolved[0].rule, 1u);
  EXPECT_EQ(embed.canonical_json,
            R"({"dim":1,"placements":["rank:1/cpu","rank:0/cpu"],"type":"chunk","version":1})");
  EXPECT_EQ(embed.fingerprint, Fingerprint(embed.canonical_json));
  ASSERT_EQ(embed.shards.size(), 2u);
  EXPECT_EQ(embed.shards[0].placement.rank(), 1);
  EXPECT_EQ(embed.shards[1].offsets, (Shape{0, 4}));

  EXPECT_EQ(resolved[1].rule, std::nullopt);  // replicated
  const ParameterLayout& norm = resolved[1].layout;
  EXPECT_EQ(norm.canonical_json, "\"replicated\"");
  EXPECT_FALSE(norm.spec.has_value());
  ASSERT_EQ(norm.shards.size(), 3u);
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(norm.shards[r], (ShardMetadata{{0}, {4}, Placement::ForRank(r)}));
  }
  // Shorthand expanded with the world size: 5 rows over 3 ranks -> 2, 2, 1.
  ASSERT_EQ(resolved[2].layout.shards.size(), 3u);
  EXPECT_EQ(resolved[2].layout.shards[2].sizes, (Shape{1}));
  EXPECT_EQ(resolved[2].layout.canonical_json,
            R"({"dim":0,"placements":["rank:0","rank:1","rank:2"],"type":"chunk","version":1})");
}

TEST(ResolveTest, ErrorsNameTheParameter) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(kPlan));
  EXPECT_THAT(Resolve(plan, {{"embed.weight", {10}}}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("parameter \"embed.weight\" (rule 1, \"embed.weight\"): dim 1 is "
                                 "out of range for a 1-d tensor")));
  EXPECT_THAT(Resolve(plan, {{"layers.0.attn.qkv.weight", {}}}, 2),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("parameter \"layers.0.attn.qkv.weight\" (rule 0, "
                                 "\"layers.*.attn.qkv.weight\"): a 0-d tensor cannot be chunked")));
  EXPECT_THAT(Resolve(plan, {{"embed.weight", {10, 8}}}, 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("parameter \"embed.weight\" (rule 1, \"embed.weight\"): shard 0 "
                                 "(offsets [0, 0], sizes [10, 4], rank:1/cpu) is placed on rank 1, "
                                 "outside the world of 1 rank")));
  EXPECT_THAT(
      Resolve(plan, {{"a", {1}}, {"a", {1}}}, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parameter \"a\": listed twice")));
  plan.src_rank = 4;
  EXPECT_THAT(Resolve(plan, {}, 4), StatusIs(absl::StatusCode::kInvalidArgument,
                                             HasSubstr("src_rank 4 is outside the world of 4")));
}

// Names are quoted whole (they used to be cut at 40 characters), JSON-escaped.
TEST(ResolveTest, ErrorsQuoteLongNamesWhole) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(R"({"rules": [
      {"match": "model.language_model.layers.*.self_attn.q_proj.weight",
       "spec": {"type": "chunk", "dim": 2, "placements": ["rank:0", "rank:1"]}}]})"));
  EXPECT_THAT(
      Resolve(plan, {{"model.language_model.layers.12.self_attn.q_proj.weight", {8, 8}}}, 2),
      StatusIs(absl::StatusCode::kInvalidArgument,
               HasSubstr("parameter \"model.language_model.layers.12.self_attn.q_proj.weight\" "
                         "(rule 0, \"model.language_model.layers.*.self_attn.q_proj.weight\"): "
                         "dim 2 is out of range")));
  EXPECT_THAT(
      Resolve(plan, {{"a\"b", {1}}, {"a\"b", {1}}}, 2),
      StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(R"(parameter "a\"b": listed twice)")));
}

// A natural Llama plan lists the generic projection rule before o_proj's own: every o_proj is
// taken by rules[0], so rules[1] is shadowed; rules[2] matches nothing; rules[3] keeps some of its
// matches (rules[0] took the others) and is not idle.
TEST(FindIdleRulesTest, NamesShadowingRulesWithTheirCounts) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(R"({"rules": [
      {"match": "layers.*.attn.*_proj.weight", "spec": {"type": "chunk", "dim": 0,
                                                         "placements": {"ranks": "all"}}},
      {"match": "layers.*.attn.o_proj.weight", "spec": {"type": "chunk", "dim": 1,
                                                         "placements": {"ranks": "all"}}},
      {"match": "lm_head.weight", "spec": {"type": "chunk", "dim": 0,
                                            "placements": {"ranks": "all"}}},
      {"match": "layers.*.**", "spec": {"type": "chunk", "dim": 0,
                                        "placements": {"ranks": "all"}}}]})"));
  std::vector<ParameterInfo> parameters;
  for (const char* layer : {"0", "1"}) {
    for (const char* proj : {"q", "o"}) {
      parameters.push_back(
          {absl::StrCat("layers.", layer, ".attn.", proj, "_proj.weight"), {4, 4}});
    }
    parameters.push_back({absl::StrCat("layers.", layer, ".norm.weight"), {4}});
  }
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::vector<ResolvedParameter> resolved,
                                Resolve(plan, parameters, 2));
  const std::vector<IdleRule> idle = FindIdleRules(plan, resolved);
  ASSERT_EQ(idle.size(), 2u);
  EXPECT_EQ(idle[0].rule, 1u);
  EXPECT_EQ(idle[0].matches, 2);
  EXPECT_EQ(idle[0].taken_by, (std::vector<std::pair<size_t, int64_t>>{{0, 2}}));
  EXPECT_EQ(DescribeIdleRule(plan, idle[0]),
            R"(rules[1] ("layers.*.attn.o_proj.weight") matches 2 parameters, all taken by )"
            R"(rules[0] ("layers.*.attn.*_proj.weight"))");
  EXPECT_EQ(idle[1].rule, 2u);
  EXPECT_EQ(idle[1].matches, 0);
  EXPECT_EQ(DescribeIdleRule(plan, idle[1]), R"(rules[2] ("lm_head.weight") matches no parameter)");
}

TEST(FindIdleRulesTest, SeveralEarlierRulesEachWithItsCount) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(R"({"rules": [
      {"match": "a.*", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"]}},
      {"match": "*.x", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"]}},
      {"match": "b.y", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"]}},
      {"match": "*.*", "spec": {"type": "chunk", "dim": 0, "placements": ["rank:0"]}}]})"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      std::vector<ResolvedParameter> resolved,
      Resolve(plan, {{"a.x", {2}}, {"a.y", {2}}, {"b.x", {2}}, {"b.y", {2}}}, 1));
  const std::vector<IdleRule> idle = FindIdleRules(plan, resolved);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(DescribeIdleRule(plan, idle[0]),
            R"(rules[3] ("*.*") matches 4 parameters, all taken by rules[0] ("a.*") (2), )"
            R"(rules[1] ("*.x") (1) and rules[2] ("b.y") (1))");
  // One parameter: "taken by", without "all".
  SHARDKIT_ASSERT_OK_AND_ASSIGN(resolved, Resolve(plan, {{"b.y", {2}}}, 1));
  const std::vector<IdleRule> one = FindIdleRules(plan, resolved);
  ASSERT_EQ(one.size(), 3u);  // rules 0 and 1 match nothing, rule 3 is shadowed by rule 2
  EXPECT_EQ(DescribeIdleRule(plan, one[2]),
            R"(rules[3] ("*.*") matches 1 parameter, taken by rules[2] ("b.y"))");
}

// The README's FP8 plan: a weight cut on 128-row blocks and its scales cut with the same
// placements hold the same blocks on every rank.
TEST(ResolveTest, AlignedWeightAndItsScales) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(R"({"rules": [
      {"match": "**.weight", "spec": {"type": "chunk", "dim": 0, "align": 128,
                                      "placements": {"ranks": "all"}}},
      {"match": "**.weight_scale_inv", "spec": {"type": "chunk", "dim": 0,
                                                "placements": {"ranks": "all"}}}]})"));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      std::vector<ResolvedParameter> resolved,
      Resolve(plan, {{"mlp.weight", {300, 256}}, {"mlp.weight_scale_inv", {3, 2}}}, 4));
  const ParameterLayout& weight = resolved[0].layout;
  const ParameterLayout& scale = resolved[1].layout;
  EXPECT_EQ(weight.canonical_json,
            R"({"align":128,"dim":0,"placements":["rank:0","rank:1","rank:2","rank:3"],)"
            R"("type":"chunk","version":1})");
  ASSERT_EQ(weight.shards.size(), 4u);
  ASSERT_EQ(scale.shards.size(), 4u);
  const int64_t rows[] = {0, 128, 256, 300, 300};
  for (size_t i = 0; i < 4; ++i) {
    EXPECT_EQ(weight.shards[i].offsets[0], rows[i]) << i;
    EXPECT_EQ(weight.shards[i].sizes[0], rows[i + 1] - rows[i]) << i;
    EXPECT_EQ(scale.shards[i].offsets[0], (rows[i] + 127) / 128) << i;
    EXPECT_EQ(scale.shards[i].sizes[0], (rows[i + 1] + 127) / 128 - (rows[i] + 127) / 128) << i;
    EXPECT_EQ(scale.shards[i].placement, weight.shards[i].placement) << i;
  }
}

// A replicated parameter has one shard per rank: the world size is bounded before laying out.
TEST(ResolveTest, WorldSizeIsBounded) {
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Plan plan, ParsePlan(kPlan));
  EXPECT_THAT(Resolve(plan, {{"norm.weight", {4}}}, int64_t{1} << 31),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("world size 2147483648 is outside [1, 1048576]")));
  EXPECT_THAT(Resolve(plan, {}, 0),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("world size 0 is outside")));
  EXPECT_THAT(LayOutParameter(std::nullopt, {4}, kMaxWorldSize + 1),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("world size 1048577 is outside [1, 1048576]")));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(ParameterLayout replicated,
                                LayOutParameter(std::nullopt, {4}, kMaxWorldSize));
  EXPECT_EQ(replicated.shards.size(), static_cast<size_t>(kMaxWorldSize));
}

}  // namespace
}  // namespace shardkit::specs
