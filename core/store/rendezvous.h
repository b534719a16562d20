// Rendezvous helpers shared by the backends: a rank announces itself in the Store and waits for
// the others, so that a rank that never starts is named instead of leaving its peers to guess.
//
//   SHARDKIT_RETURN_IF_ERROR(AwaitMembers(store, prefix, rank, world_size, deadline));
#ifndef SHARDKIT_CORE_STORE_RENDEZVOUS_H_
#define SHARDKIT_CORE_STORE_RENDEZVOUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "core/store/store.h"

namespace shardkit {

// Sets "<prefix>/joined/<rank>", counts itself in "<prefix>/joined/count" and waits for
// "<prefix>/joined/all", which the last rank to join sets: a constant number of store operations
// per rank. Each rank joins once per prefix.
// Errors: kDeadlineExceeded naming the ranks that never joined; the store's errors.
[[nodiscard]] absl::Status AwaitMembers(Store& store, const std::string& prefix, int rank, int size,
                                        absl::Time deadline);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_RENDEZVOUS_H_
