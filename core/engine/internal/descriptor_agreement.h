// Internal: the agreement step of the sharding engine.
//
// Every rank describes what it is about to do as a JSON "descriptor" (parameter names, bound
// specs, shapes, dtypes, src_rank, strategy, …) and lists its local problems. One all-gather of
// fixed-size digests (SHA-256 of the descriptor + a readiness flag) tells every rank whether all
// agree; only when they do not is a second all-gather of the full descriptors made, so that every
// rank can build the **same** message naming each local problem and each disagreeing rank with
// the JSON paths where it differs. No tensor data moves before this returns OK.
#ifndef SHARDKIT_CORE_ENGINE_INTERNAL_DESCRIPTOR_AGREEMENT_H_
#define SHARDKIT_CORE_ENGINE_INTERNAL_DESCRIPTOR_AGREEMENT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "core/comm/communicator.h"
#include "nlohmann/json.hpp"

namespace shardkit::internal {

// Collective. `descriptor` must be what every rank is expected to agree on; `local_errors` the
// problems this rank found (each already naming its parameter); `local_code` the code of the first
// of them.
// Errors: identical on every rank: kInvalidArgument "<op>: ranks do not agree: rank R: <error>;
// …; rank S differs from rank T: <path> is <X>, not <Y>; …" — or "<op>: ranks 0-3: <error>; …"
// when the ranks' descriptors are the same and only local problems stand in the way (a bad spec,
// a device the backend cannot move, an allocation), with the `local_code` of the lowest rank that
// has one (as AgreeOnStatus). Transport errors as the Communicator's.
[[nodiscard]] absl::Status AgreeOnDescriptor(
    Communicator& comm, const nlohmann::json& descriptor,
    const std::vector<std::string>& local_errors, std::string_view op, const CallOptions& options,
    absl::StatusCode local_code = absl::StatusCode::kInvalidArgument);

// The paths where `a` and `b` differ, as "path is A, not B" (at most `limit`), for messages.
std::vector<std::string> DescribeDifferences(const nlohmann::json& a, const nlohmann::json& b,
                                             size_t limit);

}  // namespace shardkit::internal

#endif  // SHARDKIT_CORE_ENGINE_INTERNAL_DESCRIPTOR_AGREEMENT_H_
