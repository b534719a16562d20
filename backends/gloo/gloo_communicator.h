// The Gloo backend: a Communicator over Gloo's TCP transport, for CPU memory. Registered as
// "gloo" (link //backends:all, or this library, which is alwayslink).
//
//   ConnectOptions options;            // or ConnectFromEnv() with SHARDKIT_BACKEND=gloo
//   options.backend = "gloo";
//   options.rank = rank;
//   options.world_size = 4;
//   options.store = store;             // shared by all ranks (FileStore, RedisStore, …)
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, Connect(options));
//
// Transport: one TCP connection per pair of ranks that exchange payload, made on the first
// payload exchange between them (lazy_context.h), bound to options.hostname or options.ifname
// (default 127.0.0.1): a scatter from one root costs n-1 connections there and 1 on every other
// rank, not n(n-1)/2 (Gloo gives every pair a listening port of its own, which a full mesh of 256
// ranks on one host runs out of). Rendezvous: each rank announces itself under
// "<key_prefix>/joined/<rank>" and waits for all ranks (naming the missing ones on timeout); the
// control mesh (agreement, barriers) still connects every pair at once. A pair's two sides
// exchange addresses under "<key_prefix>/gloo/<rank>/<peer>" when it is first needed. Payloads
// move with one Gloo UnboundBuffer per peer chunk, straight from and into caller memory, all
// posted before any wait. Every Gloo call is wrapped in try/catch (gloo_status.h): IoException
// "Timed out" or "Connect timeout" -> kDeadlineExceeded, other IoException
// -> kUnavailable, EnforceNotMet and anything else -> kInternal. After a failure the backend
// closes its connections, so peers blocked on this rank fail fast instead of waiting out their
// deadline. SIGPIPE is ignored process-wide (a write to a dead peer would otherwise kill us).
#ifndef SHARDKIT_BACKENDS_GLOO_GLOO_COMMUNICATOR_H_
#define SHARDKIT_BACKENDS_GLOO_GLOO_COMMUNICATOR_H_

#include <memory>

#include "absl/status/statusor.h"
#include "core/comm/communicator.h"
#include "core/comm/connect_options.h"

namespace shardkit::gloo_backend {

// The "gloo" factory. Errors: kInvalidArgument if the hostname/interface cannot be used;
// kDeadlineExceeded naming the ranks that never joined; kUnavailable on connection errors.
[[nodiscard]] absl::StatusOr<std::unique_ptr<Communicator>> CreateGlooCommunicator(
    const ConnectOptions& options);

}  // namespace shardkit::gloo_backend

#endif  // SHARDKIT_BACKENDS_GLOO_GLOO_COMMUNICATOR_H_
