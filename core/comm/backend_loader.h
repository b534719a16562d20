// Finding a backend by name, the host side of the plugin ABI (backend_plugin.h): Connect
// (connect.h) uses it, `shardkit --version` lists what it finds. A name is looked up among the
// backends built into this program (backend_registry.h), then as a plugin file
// `libshardkit_backend_<name>.so` in each directory of PluginSearchPath(), first match wins.
// A loaded plugin stays loaded until the process ends; its allocators are registered with this
// program's allocator table (core/tensor/allocator.h) when it is loaded.
//
//   SHARDKIT_ASSIGN_OR_RETURN(LoadedBackend backend, FindBackendOrPlugin("nccl"));
//   SHARDKIT_ASSIGN_OR_RETURN(std::unique_ptr<Communicator> comm, backend.factory(options));
//
// Thread-safe.
#ifndef SHARDKIT_CORE_COMM_BACKEND_LOADER_H_
#define SHARDKIT_CORE_COMM_BACKEND_LOADER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core/comm/backend_registry.h"
#include "core/comm/communicator.h"

namespace shardkit {

struct LoadedBackend {
  std::string name;
  std::string path;      // the plugin file; empty for a built-in backend
  std::string build_id;  // the plugin's build id; this program's for a built-in backend
  BackendFactory factory = nullptr;
  // The plugin's describe function (backend_plugin.h), when it has one.
  int (*describe)(char* text, size_t capacity) = nullptr;
};

// "libshardkit_backend_<name>.so".
std::string PluginFileName(std::string_view name);

// The directories searched for plugins, in order, without duplicates: each entry of
// SHARDKIT_PLUGIN_PATH (colon-separated, empty entries skipped), then <executable's dir>/../lib/
// shardkit, then the executable's own directory, then those AddPluginDirectory added.
std::vector<std::string> PluginSearchPath();

// Appends `dir` to PluginSearchPath for the rest of this process: for a program whose plugins
// do not sit by its executable, such as the Python package, whose extension module adds the
// wheel's shardkit/lib/shardkit when it is imported (no environment variable needed). Thread-safe.
void AddPluginDirectory(const std::string& dir);

// The built-in backend `name`, else the first plugin file for it on PluginSearchPath(), loaded.
// Errors: kInvalidArgument for a name that is not lowercase letters, digits, '_' and '-';
// kNotFound `backend "nccl" not found: built in: gloo; no libshardkit_backend_nccl.so in: <dirs>
// (set SHARDKIT_PLUGIN_PATH)`; kFailedPrecondition as LoadBackendPlugin.
[[nodiscard]] absl::StatusOr<LoadedBackend> FindBackendOrPlugin(const std::string& name);

// Loads the plugin file at `path` as backend `name`, accepting only plugins of build
// `expected_build_id` (this program's BuildId() outside tests).
// Errors: kFailedPrecondition `backend "<name>": plugin <path>: <reason>`, the reason being the
// dlopen error verbatim (e.g. "libnccl.so.2: cannot open shared object file: …"), a missing entry
// point, another ABI version or struct size (both named), another build id (both named), or
// another backend name.
[[nodiscard]] absl::StatusOr<LoadedBackend> LoadBackendPlugin(const std::string& path,
                                                              const std::string& name,
                                                              std::string_view expected_build_id);

// What `shardkit --version` lists: the built-in backends, then every plugin file on the search
// path (the first per name, in path order; names already built in are skipped), each with OK or
// the reason it cannot be loaded (LoadBackendPlugin's, without the "backend …: plugin …:" prefix);
// for a loaded plugin with a describe function, what it finds on this host, or why it cannot be
// used here.
struct AvailableBackend {
  std::string name;
  std::string path;  // empty: built in
  absl::Status loadable;
  absl::Status usable;      // kFailedPrecondition with the plugin's reason
  std::string description;  // "transports: self, tcp, posix"; empty when it says nothing
};
std::vector<AvailableBackend> AvailableBackends();

// Collective, the first call on a communicator Connect creates: every rank contributes its
// backend's name and build id; if any differ, every rank returns the same kFailedPrecondition
// naming each rank's build ("rank 0: testgloo plugin, build 1a…; rank 1: testgloo plugin, build
// 2b…"), so a job mixing two builds fails at once. Errors: also the AllGather's.
[[nodiscard]] absl::Status AgreeOnBackendBuild(Communicator& comm, const LoadedBackend& backend);

}  // namespace shardkit

#endif  // SHARDKIT_CORE_COMM_BACKEND_LOADER_H_
