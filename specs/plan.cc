#include "specs/plan.h"

#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/json/json_reader.h"
#include "specs/internal/spec_binder.h"
#include "specs/pattern.h"

namespace shardkit::specs {
namespace {

using json::Json;

absl::StatusOr<PlanRule> RuleFromJson(const Json& value, std::string_view path) {
  SHARDKIT_RETURN_IF_ERROR(json::CheckObject(value, path, {"match", "spec"}));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* match, json::Required(value, path, "match"));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* spec, json::Required(value, path, "spec"));
  PlanRule rule;
  const std::string match_path = json::ChildPath(path, "match");
  SHARDKIT_ASSIGN_OR_RETURN(rule.match, json::GetString(*match, match_path));
  if (absl::Status s = ValidatePattern(rule.match); !s.ok()) {
    return json::AtPath(match_path, s);
  }
  SHARDKIT_ASSIGN_OR_RETURN(rule.spec,
                            internal::SpecFromJson(*spec, json::ChildPath(path, "spec")));
  return rule;
}

absl::Status ReadHeader(const Json& value, Plan& plan) {
  SHARDKIT_RETURN_IF_ERROR(json::CheckVersion(value, ""));
  if (const Json* src = json::Optional(value, "src_rank"); src != nullptr) {
    SHARDKIT_ASSIGN_OR_RETURN(plan.src_rank, json::GetInt(*src, "src_rank"));
    if (plan.src_rank < 0 || plan.src_rank > kMaxRank) {
      return json::PathError(
          "src_rank", absl::StrCat("rank ", plan.src_rank, " is outside [0, ", kMaxRank, "]"));
    }
  }
  if (const Json* strategy = json::Optional(value, "strategy"); strategy != nullptr) {
    SHARDKIT_ASSIGN_OR_RETURN(std::string name, json::GetString(*strategy, "strategy"));
    absl::StatusOr<Strategy> parsed = ParseStrategy(name);
    if (!parsed.ok()) return json::AtPath("strategy", parsed.status());
    plan.strategy = *parsed;
  }
  return absl::OkStatus();
}

absl::StatusOr<Plan> PlanFromJson(const Json& value) {
  SHARDKIT_RETURN_IF_ERROR(
      json::CheckObject(value, "", {"version", "src_rank", "strategy", "rules"}));
  SHARDKIT_ASSIGN_OR_RETURN(const Json* rules, json::Required(value, "", "rules"));
  Plan plan;
  SHARDKIT_RETURN_IF_ERROR(ReadHeader(value, plan));
  if (!rules->is_array()) return json::TypeError("rules", "array of rules", *rules);
  plan.rules.reserve(rules->size());
  for (size_t i = 0; i < rules->size(); ++i) {
    SHARDKIT_ASSIGN_OR_RETURN(PlanRule rule,
                              RuleFromJson((*rules)[i], json::IndexPath("rules", i)));
    plan.rules.push_back(std::move(rule));
  }
  return plan;
}

absl::Status ParameterError(const Plan& plan, const std::string& name, std::optional<size_t> rule,
                            const absl::Status& status) {
  std::string context = absl::StrCat("parameter ", QuoteName(name));
  if (rule.has_value()) {
    absl::StrAppend(&context, " (rule ", *rule, ", ", QuoteName(plan.rules[*rule].match), ")");
  }
  return Annotate(status, context);
}

}  // namespace

std::string_view StrategyName(Strategy strategy) {
  switch (strategy) {
    case Strategy::kBroadcast:
      return "broadcast";
    case Strategy::kDirect:
      return "direct";
    case Strategy::kScatter:
      break;
  }
  return "scatter";
}

absl::StatusOr<Strategy> ParseStrategy(std::string_view name) {
  if (name == "scatter") return Strategy::kScatter;
  if (name == "broadcast") return Strategy::kBroadcast;
  if (name == "direct") return Strategy::kDirect;
  return absl::InvalidArgumentError(
      absl::StrCat("expected \"scatter\", \"broadcast\" or \"direct\", got ",
                   json::DescribeValue(Json(std::string(name)))));
}

absl::StatusOr<Plan> ParsePlan(std::string_view json_text) {
  SHARDKIT_ASSIGN_OR_RETURN(Json json, json::ParseJson(json_text));
  return PlanFromJson(json);
}

std::string CanonicalJson(const Plan& plan) {
  Json rules = Json::array();
  for (const PlanRule& rule : plan.rules) {
    rules.push_back(Json{{"match", rule.match}, {"spec", internal::SpecToJson(rule.spec)}});
  }
  Json out = Json::object();
  out["version"] = 1;
  out["src_rank"] = plan.src_rank;
  out["strategy"] = std::string(StrategyName(plan.strategy));
  out["rules"] = std::move(rules);
  return json::Dump(out);
}

absl::StatusOr<SpecOrPlan> ParseSpecOrPlan(std::string_view json_text) {
  SHARDKIT_ASSIGN_OR_RETURN(Json json, json::ParseJson(json_text));
  if (json.is_object() && json.contains("rules")) {
    SHARDKIT_ASSIGN_OR_RETURN(Plan plan, PlanFromJson(json));
    return plan;
  }
  SHARDKIT_ASSIGN_OR_RETURN(ShardingSpec spec, internal::SpecFromJson(json, ""));
  return spec;
}

std::optional<size_t> MatchRule(const Plan& plan, std::string_view name) {
  for (size_t i = 0; i < plan.rules.size(); ++i) {
    if (MatchesPattern(plan.rules[i].match, name)) return i;
  }
  return std::nullopt;
}

absl::StatusOr<std::vector<ResolvedParameter>> Resolve(const Plan& plan,
                                                       const std::vector<ParameterInfo>& parameters,
                                                       int64_t world_size) {
  SHARDKIT_RETURN_IF_ERROR(ValidateWorldSize(world_size));
  if (plan.src_rank >= world_size) {
    return absl::InvalidArgumentError(absl::StrCat("src_rank ", plan.src_rank,
                                                   " is outside the world of ", world_size, " rank",
                                                   world_size == 1 ? "" : "s"));
  }
  absl::flat_hash_set<std::string> seen;
  std::vector<ResolvedParameter> out;
  out.reserve(parameters.size());
  for (const ParameterInfo& parameter : parameters) {
    if (!seen.insert(parameter.name).second) {
      return ParameterError(plan, parameter.name, std::nullopt,
                            absl::InvalidArgumentError("listed twice"));
    }
    ResolvedParameter resolved{parameter.name, MatchRule(plan, parameter.name), {}};
    std::optional<ShardingSpec> spec;
    if (resolved.rule.has_value()) spec = plan.rules[*resolved.rule].spec;
    absl::StatusOr<ParameterLayout> layout = LayOutParameter(spec, parameter.shape, world_size);
    if (!layout.ok()) {
      return ParameterError(plan, parameter.name, resolved.rule, layout.status());
    }
    resolved.layout = *std::move(layout);
    out.push_back(std::move(resolved));
  }
  return out;
}

std::vector<IdleRule> FindIdleRules(const Plan& plan,
                                    const std::vector<ResolvedParameter>& resolved) {
  std::vector<bool> takes(plan.rules.size());
  for (const ResolvedParameter& parameter : resolved) {
    if (parameter.rule.has_value()) takes[*parameter.rule] = true;
  }
  std::vector<IdleRule> idle;
  for (size_t i = 0; i < plan.rules.size(); ++i) {
    if (takes[i]) continue;
    IdleRule& found = idle.emplace_back();
    found.rule = i;
    std::vector<int64_t> taken(i);  // per earlier rule: how many of rule i's matches it took
    for (const ResolvedParameter& parameter : resolved) {
      // A parameter rule i matches has a first match, and it comes before i (i takes none).
      if (!MatchesPattern(plan.rules[i].match, parameter.name)) continue;
      ++found.matches;
      ++taken[*parameter.rule];
    }
    for (size_t earlier = 0; earlier < i; ++earlier) {
      if (taken[earlier] > 0) found.taken_by.emplace_back(earlier, taken[earlier]);
    }
  }
  return idle;
}

std::string DescribeIdleRule(const Plan& plan, const IdleRule& idle) {
  const auto rule = [&](size_t i) {
    return absl::StrCat("rules[", i, "] (", QuoteName(plan.rules[i].match), ")");
  };
  std::string out = rule(idle.rule);
  if (idle.matches == 0) return absl::StrCat(out, " matches no parameter");
  absl::StrAppend(&out, " matches ", idle.matches, idle.matches == 1 ? " parameter" : " parameters",
                  idle.matches == 1 ? ", taken by " : ", all taken by ");
  if (idle.taken_by.size() == 1) return absl::StrCat(out, rule(idle.taken_by[0].first));
  for (size_t k = 0; k < idle.taken_by.size(); ++k) {
    if (k > 0) out += k + 1 == idle.taken_by.size() ? " and " : ", ";
    absl::StrAppend(&out, rule(idle.taken_by[k].first), " (", idle.taken_by[k].second, ")");
  }
  return out;
}

std::string DescribeShardsNothing(const std::vector<ResolvedParameter>& resolved) {
  if (resolved.empty()) return "";
  for (const ResolvedParameter& parameter : resolved) {
    if (parameter.rule.has_value()) return "";
  }
  return absl::StrCat("the plan shards nothing: no rule matches any of the ", resolved.size(),
                      resolved.size() == 1 ? " parameter" : " parameters");
}

}  // namespace shardkit::specs
