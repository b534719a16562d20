// Collective errors: every rank contributes its local Status; every rank returns the same one.
//
// This is how shardkit keeps a local failure (a bad argument on one rank) from hanging or
// desynchronising its peers: the failing rank does not return early, it joins this collective,
// and all ranks fail together with one message.
//
//   absl::Status local = ValidateMyInputs();
//   SHARDKIT_RETURN_IF_ERROR(AgreeOnStatus(comm, local, "Gather(encoder.weight)"));
#ifndef SHARDKIT_CORE_COMM_COLLECTIVE_STATUS_H_
#define SHARDKIT_CORE_COMM_COLLECTIVE_STATUS_H_

#include <string_view>

#include "absl/status/status.h"
#include "core/comm/communicator.h"

namespace shardkit {

// Collective over `comm` (every rank must call it, in the same order as other collectives).
// Returns OK on every rank if every rank's `local` is OK.
// Errors: if any rank's `local` is not OK, every rank returns the same Status: the code of the
// lowest failing rank, message "<context>: <ranks>: <message>; <ranks>: <message>", one entry per
// distinct message (each capped at 2 KiB), ordered by the lowest rank that reported it, its ranks
// ascending with runs of three or more as first-last: "writing: ranks 0-2, 5: disk full; rank 3:
// permission denied". If the exchange itself fails, its transport error (which may differ between
// ranks, as it does in any collective).
[[nodiscard]] absl::Status AgreeOnStatus(Communicator& comm, const absl::Status& local,
                                         std::string_view context, const CallOptions& options = {});

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_COLLECTIVE_STATUS_H_
