// libFuzzer target for the spec/plan parser. Besides "never crash", it checks invariants:
//   - every rejection is kInvalidArgument;
//   - the canonical form is a fixed point: canon(parse(canon(x))) == canon(x);
//   - any layout that binds on a few shapes/world sizes tiles the tensor exactly.
// Built with clang by tools/fuzz (corpus seeded from specs/testdata); without libFuzzer, the
// //specs/fuzz:spec_parser_fuzzer target links a driver that runs the files given as arguments.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/base/check.h"
#include "specs/parameter_layout.h"
#include "specs/plan.h"
#include "specs/spec_json.h"

namespace shardkit::specs {
namespace {

void CheckLayouts(const ShardingSpec& spec) {
  const Shape shapes[] = {{12, 4}, {7}, {0, 3}, {}, {5, 5, 2}};
  for (const Shape& shape : shapes) {
    for (int64_t world : {1, 3, 8}) {
      absl::StatusOr<ParameterLayout> layout = LayOutParameter(spec, shape, world);
      if (!layout.ok()) {
        SHARDKIT_CHECK(layout.status().code() == absl::StatusCode::kInvalidArgument)
            << layout.status().ToString();
        continue;
      }
      SHARDKIT_CHECK(ValidateTiling(layout->shards, shape).ok()) << layout->canonical_json;
      absl::StatusOr<ShardingSpec> reparsed = ParseSpec(layout->canonical_json);
      SHARDKIT_CHECK(reparsed.ok()) << reparsed.status().ToString();
      SHARDKIT_CHECK(CanonicalJson(*reparsed) == layout->canonical_json);
    }
  }
}

void FuzzOne(std::string_view text) {
  absl::StatusOr<SpecOrPlan> parsed = ParseSpecOrPlan(text);
  if (!parsed.ok()) {
    SHARDKIT_CHECK(parsed.status().code() == absl::StatusCode::kInvalidArgument)
        << parsed.status().ToString();
    return;
  }
  if (const Plan* plan = std::get_if<Plan>(&*parsed)) {
    const std::string canonical = CanonicalJson(*plan);
    absl::StatusOr<Plan> again = ParsePlan(canonical);
    SHARDKIT_CHECK(again.ok()) << again.status().ToString() << " for " << canonical;
    SHARDKIT_CHECK(CanonicalJson(*again) == canonical) << canonical;
    for (const PlanRule& rule : plan->rules) CheckLayouts(rule.spec);
    return;
  }
  const ShardingSpec& spec = std::get<ShardingSpec>(*parsed);
  const std::string canonical = CanonicalJson(spec);
  absl::StatusOr<ShardingSpec> again = ParseSpec(canonical);
  SHARDKIT_CHECK(again.ok()) << again.status().ToString() << " for " << canonical;
  SHARDKIT_CHECK(CanonicalJson(*again) == canonical) << canonical;
  CheckLayouts(spec);
}

}  // namespace
}  // namespace shardkit::specs

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardkit::specs::FuzzOne(std::string_view(reinterpret_cast<const char*>(data), size));
  return 0;
}
