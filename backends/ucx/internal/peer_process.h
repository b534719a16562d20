// Whether a peer's process still runs, for peers on this host: UCX's shared-memory transports
// learn of a dead peer only from the keepalive (and in UCX 1.13 not always), so each rank
// publishes who its process is, and a rank waiting on a peer of the same host and PID namespace
// checks /proc for it (a killed rank is seen within one wait tick, 100 ms).
//
//   store.Set(key, ThisProcess());
//   if (ProcessGone(*store.Get(key, timeout))) { … the peer was killed or crashed … }
#ifndef SHARDKIT_BACKENDS_UCX_INTERNAL_PEER_PROCESS_H_
#define SHARDKIT_BACKENDS_UCX_INTERNAL_PEER_PROCESS_H_

#include <string>

namespace shardkit::ucx_backend {

// This process: "<host> <pid> <start time>", the host being the boot id and the PID namespace
// (two containers of one machine with PID namespaces of their own are two hosts here).
std::string ThisProcess();

// Whether `identity` (another process's ThisProcess) names a process of this host and PID
// namespace (whose liveness ProcessGone can tell).
bool OnThisHost(const std::string& identity);

// Whether `identity` (another process's ThisProcess) names a process of this host and PID
// namespace that has ended or is ending: no such PID, a zombie, one exiting (killed: the kernel's
// PF_EXITING), or a PID reused by a younger process. False for a process of another host, or an
// identity that cannot be read.
bool ProcessGone(const std::string& identity);

}  // namespace shardkit::ucx_backend

#endif  // SHARDKIT_BACKENDS_UCX_INTERNAL_PEER_PROCESS_H_
