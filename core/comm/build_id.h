// shardkit's version and build id. The build id names the sources a binary or plugin was built
// from: the first 16 hex digits of the SHA-256 of the plugin ABI header (backend_plugin.h) and the
// source revision (tools/workspace_status.sh: the git commit, "-dirty" when tracked files differ).
// It is the same in every build configuration (default, cuda, asan), so a host accepts a plugin
// built with other flags from the same sources, and refuses one built from other sources.
// Generated at build time by the genrule //core/comm:build_id_cc (a stamped genrule reading
// Bazel's stable workspace status); only that file and the links that use it are redone when
// the revision changes.
//
//   std::cout << "shardkit " << kShardkitVersion << " (build " << BuildId() << ")\n";
#ifndef SHARDKIT_CORE_COMM_BUILD_ID_H_
#define SHARDKIT_CORE_COMM_BUILD_ID_H_

namespace shardkit {

// SHARDKIT_VERSION of core/comm/version.bzl, e.g. "0.1.0".
extern const char kShardkitVersion[];

// 16 lowercase hex digits, e.g. "3f9a0c1d2b4e5f67".
const char* BuildId();

// What the id was computed from: the revision line of tools/workspace_status.sh.
const char* SourceRevision();

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_BUILD_ID_H_
