// Plans: which spec each parameter of a module gets.
//
//   {"version": 1, "src_rank": 0, "strategy": "scatter",
//    "rules": [{"match": "layers.*.attn.qkv.weight", "spec": {...}},
//              {"match": "embed.weight", "spec": {...}}]}
//
// "version" (must be 1), "src_rank" (default 0) and "strategy" ("scatter" by default,
// "broadcast", or "direct") are optional; "rules" is required (possibly empty). Patterns: see
// pattern.h. The first matching rule wins; a parameter no rule matches is replicated. The canonical
// form has every key, defaults filled in, rules in order, each spec in its own canonical form.
// FindIdleRules names the rules a set of parameters leaves unused: those that match none, and
// those shadowed by earlier rules (every parameter they match was taken first).
//
//   SHARDKIT_ASSIGN_OR_RETURN(Plan plan, ParsePlan(text));
//   SHARDKIT_ASSIGN_OR_RETURN(std::vector<ResolvedParameter> resolved,
//                             Resolve(plan, {{"embed.weight", {10, 8}}, {"norm.weight", {4}}},
//                                     /*world_size=*/3));
//   for (const IdleRule& idle : FindIdleRules(plan, resolved)) warn(DescribeIdleRule(plan, idle));
#ifndef SHARDKIT_SPECS_PLAN_H_
#define SHARDKIT_SPECS_PLAN_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/shape.h"
#include "specs/parameter_layout.h"
#include "specs/sharding_spec.h"

namespace shardkit::specs {

// How the source's data reaches the ranks: kScatter sends each rank its shards; kBroadcast sends
// every rank everything (each keeps its shards); kDirect moves no tensor data at all — every rank
// reads its own shards from a checkpoint it sees itself (`shardkit shard` only: tensors in memory
// cannot be read that way, so the engine refuses it). Which program wrote a shard directory
// (`shard` with one of these, `reshard`, `save`) is another question, index.json's: see
// shard_dir::WrittenBy (integration/formats/shard_dir/shard_dir.h).
enum class Strategy { kScatter, kBroadcast, kDirect };

// "scatter" / "broadcast" / "direct".
std::string_view StrategyName(Strategy strategy);
// A plan's strategy: "scatter", "broadcast" or "direct". Errors: kInvalidArgument naming the
// string.
[[nodiscard]] absl::StatusOr<Strategy> ParseStrategy(std::string_view name);

struct PlanRule {
  std::string match;  // a pattern (pattern.h)
  ShardingSpec spec;
};

struct Plan {
  int64_t src_rank = 0;
  Strategy strategy = Strategy::kScatter;
  std::vector<PlanRule> rules;
};

// Errors: kInvalidArgument as ParseSpec, with paths like `rules[1].spec.dim` and
// `rules[0].match: "**" must be a whole dotted segment, ...`.
[[nodiscard]] absl::StatusOr<Plan> ParsePlan(std::string_view json_text);

// The canonical bytes of `plan`.
std::string CanonicalJson(const Plan& plan);

// A spec file or a plan file: a top-level object with a "rules" key is a plan.
using SpecOrPlan = std::variant<ShardingSpec, Plan>;
[[nodiscard]] absl::StatusOr<SpecOrPlan> ParseSpecOrPlan(std::string_view json_text);

// Index of the first rule whose pattern matches `name`, or nullopt (replicated).
std::optional<size_t> MatchRule(const Plan& plan, std::string_view name);

struct ParameterInfo {
  std::string name;
  Shape shape;
};

struct ResolvedParameter {
  std::string name;
  std::optional<size_t> rule;  // the matching rule; nullopt: replicated
  ParameterLayout layout;
};

// One entry per parameter, in the given order. Checks every matched spec against the parameter's
// shape and `world_size` (LayOutParameter) and `src_rank` < world_size.
// Errors: kInvalidArgument naming the parameter and rule, e.g. `parameter "embed.weight" (rule 1,
// "embed.*"): dim 2 is out of range ...`; a duplicate parameter name; src_rank outside the world;
// world_size outside [1, kMaxWorldSize].
[[nodiscard]] absl::StatusOr<std::vector<ResolvedParameter>> Resolve(
    const Plan& plan, const std::vector<ParameterInfo>& parameters, int64_t world_size);

// A rule that takes no parameter: its pattern matches none of them, or every one it matches was
// taken by an earlier rule (first match wins: the rule is shadowed, and its spec applies nowhere).
struct IdleRule {
  size_t rule = 0;
  int64_t matches = 0;  // parameters its pattern matches; 0: none
  // The earlier rules that took those parameters, ascending, with how many each took (their
  // counts add up to `matches`); empty when `matches` is 0.
  std::vector<std::pair<size_t, int64_t>> taken_by;
};

// The idle rules of `plan` over `resolved` (what Resolve returned for `plan`), in rule order; a
// rule that takes at least one parameter is not listed, however many of its matches earlier
// rules took. Cost: one MatchesPattern per parameter for each rule that takes none.
std::vector<IdleRule> FindIdleRules(const Plan& plan,
                                    const std::vector<ResolvedParameter>& resolved);

// One line for messages: `rules[2] ("nothing.*") matches no parameter`, or, shadowed,
// `rules[4] ("layers.*.o_proj") matches 4 parameters, all taken by rules[0] ("layers.*.*_proj")`
// — several earlier rules each with its count: `... matches 4 parameters, all taken by rules[0]
// ("a.*") (3) and rules[2] ("b.*") (1)` (three or more: `rules[0] (...) (2), rules[1] (...) (1) and
// rules[3] (...) (1)`). Patterns are quoted with QuoteName.
std::string DescribeIdleRule(const Plan& plan, const IdleRule& idle);

// Why a plan shards nothing — no parameter of `resolved` (at least one) took a rule, so every rank
// would hold every parameter whole — as one phrase: "the plan shards nothing: no rule matches any
// of the N parameters"; "" when some parameter took a rule, or there are none. The commands that
// bind a plan refuse such a plan unless told it is meant (--allow-replicated-only).
std::string DescribeShardsNothing(const std::vector<ResolvedParameter>& resolved);

}  // namespace shardkit::specs

#endif  // SHARDKIT_SPECS_PLAN_H_
