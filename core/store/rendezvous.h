// Rendezvous helpers: a rank announces itself in the Store and waits for the others, so that a
// rank that never starts is named instead of leaving its peers to guess.
//
// JoinFreshGeneration is how Connect (core/comm/connect.h) meets: a run id is a namespace users
// may reuse (`shardkit launch --run-id ws` twice), so each job that meets under one prefix gets
// a generation of its own, and two processes that claim the same rank fail at once. Backends
// then meet again under the generation's prefix with AwaitMembers (also for their subgroups).
//
//   SHARDKIT_ASSIGN_OR_RETURN(std::string keys, JoinFreshGeneration(store, "/comm0", rank, size,
//                                                                   launch_id, deadline));
//   SHARDKIT_RETURN_IF_ERROR(AwaitMembers(store, keys, rank, size, deadline));
#ifndef SHARDKIT_CORE_STORE_RENDEZVOUS_H_
#define SHARDKIT_CORE_STORE_RENDEZVOUS_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "core/store/store.h"

namespace shardkit {

// Sets "<prefix>/joined/<rank>", counts itself in "<prefix>/joined/count" and waits for
// "<prefix>/joined/all", which the last rank to join sets: a constant number of store operations
// per rank. Each rank joins once per prefix (a fresh one: see JoinFreshGeneration).
// Errors: kDeadlineExceeded naming the ranks that never joined; the store's errors.
[[nodiscard]] absl::Status AwaitMembers(Store& store, const std::string& prefix, int rank, int size,
                                        absl::Time deadline);

// Joins the first generation "<prefix>/gen<G>" whose rendezvous has no outcome yet, claiming
// `rank` of `size` in it, and returns that generation's prefix once every rank has claimed its
// own: keys a finished (or failed) job left under `prefix` are never read again. The first rank
// to see how the generation ends records the outcome every member then returns, so all ranks of
// a generation fail alike, at once:
//  - a rank claimed twice (two launches whose --rank-offset ranges overlap): kInvalidArgument
//    naming that rank;
//  - a rank missing at the first member's deadline: kDeadlineExceeded naming those missing.
// A job killed while its ranks were joining leaves a generation without an outcome, whose claims
// look alive (nothing here tells a dead claimer from a slow one): the next job under `prefix`
// fails in it, usually at once as a rank claimed twice, at worst at its deadline.
// A process arriving after its generation failed on a rank claimed twice (a slow sibling) would
// otherwise wait alone in the next one: `launch_id`, the id its launcher gave every rank it
// started (empty: none), marks the generations its launch took part in, and such a process
// returns that failure too. So does a duplicate whose claim comes after the generation joined
// (two overlapping launches that together started every rank) while a process of its own
// launch is a member: it fails at once with kInvalidArgument naming its rank; the job that joined
// goes on until its launcher stops that member.
// Store operations per rank: a constant, plus one or two checks per earlier generation.
// Errors: as listed; the store's errors; kDeadlineExceeded if `deadline` passes while the
// generations are read.
[[nodiscard]] absl::StatusOr<std::string> JoinFreshGeneration(Store& store,
                                                              const std::string& prefix, int rank,
                                                              int size,
                                                              const std::string& launch_id,
                                                              absl::Time deadline);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_STORE_RENDEZVOUS_H_
