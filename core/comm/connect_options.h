// ConnectOptions: what one rank needs to join a job — rank, world size, backend name, rendezvous
// store and deadline. Programs fill it (or read it from the environment, connect.h) and pass it to
// Connect; backends receive it, completed, in their factory (backend_registry.h).
#ifndef SHARDKIT_CORE_COMM_CONNECT_OPTIONS_H_
#define SHARDKIT_CORE_COMM_CONNECT_OPTIONS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "core/base/env.h"
#include "core/store/store.h"

namespace shardkit {

struct ConnectOptions {
  int rank = 0;
  int world_size = 1;
  int local_rank = 0;
  std::string backend = env::kDefaultBackend;
  // Rendezvous store, shared by all ranks; if null, Connect opens `store_url`. Not needed for a
  // world of one.
  std::shared_ptr<Store> store;
  std::string store_url;
  // Default per-call deadline of the communicator, and the rendezvous deadline.
  absl::Duration timeout = env::kDefaultTimeout;
  // Address or interface the backend binds (Gloo: default 127.0.0.1). At most one of them.
  std::string hostname;
  std::string ifname;
  // Keys of this communicator live under "<key_prefix>/comm<K>/gen<G>/", K counting this rank's
  // Connect calls with this store (URL, or object) and prefix in this process, so ranks that
  // connect in the same order agree on fresh keys without talking, and G the job generation under
  // that prefix (JoinFreshGeneration, core/store/rendezvous.h): a job reusing a run id never reads
  // an earlier job's keys. Backends receive the final prefix here.
  std::string key_prefix;
  // The id the launcher gave every rank it started (SHARDKIT_LAUNCH_ID; empty: none). A rank that
  // comes late to a rendezvous its launch's other ranks already failed fails with them.
  std::string launch_id;
};

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_CONNECT_OPTIONS_H_
