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

// Sets "<prefix>/joined/<rank>" and waits until the keys of all `size` ranks exist.
// Errors: kDeadlineExceeded naming the ranks that never joined; the store's errors.
[[nodiscard]] absl::Status AwaitMembers(Store& store, const std::string& prefix, int rank, int size,
                                        absl::Time deadline);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_RENDEZVOUS_H_
