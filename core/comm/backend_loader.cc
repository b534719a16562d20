#include "core/comm/backend_loader.h"

#include <dirent.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "core/base/env.h"
#include "core/base/rank_text.h"
#include "core/base/status_macros.h"
#include "core/comm/backend_plugin.h"
#include "core/comm/build_id.h"
#include "core/tensor/allocator.h"
#include "core/tensor/host_memory.h"

namespace shardkit {
namespace {

constexpr char kPluginPrefix[] = "libshardkit_backend_";
constexpr char kPluginSuffix[] = ".so";

bool ValidName(std::string_view name) {
  return !name.empty() && std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
  });
}

// The directory part of `path` ("/a/b/c" -> "/a/b"; "/a" -> "/").
std::string Parent(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string ExecutableDir() {
  char buffer[4096];
  const ssize_t n = ::readlink("/proc/self/exe", buffer, sizeof(buffer) - 1);
  if (n <= 0) return "";
  return Parent(std::string(buffer, static_cast<size_t>(n)));
}

// Directories a program added (AddPluginDirectory), searched last.
struct AddedDirectories {
  std::mutex mu;
  std::vector<std::string> dirs;  // guarded by mu
};

AddedDirectories& Added() {
  static AddedDirectories* added = new AddedDirectories();
  return *added;
}

bool IsFile(const std::string& path) { return ::access(path.c_str(), F_OK) == 0; }

// Loaded plugins by path: a plugin is opened and checked once, and never unloaded.
struct PluginCache {
  std::mutex mu;
  std::map<std::string, LoadedBackend> loaded;  // guarded by mu
};

PluginCache& Cache() {
  static PluginCache* cache = new PluginCache();
  return *cache;
}

// The checks of backend_plugin.h, in its order. Errors: kFailedPrecondition with the bare reason.
absl::Status CheckPlugin(const ShardkitBackendPlugin* p, const std::string& name,
                         std::string_view expected_build_id) {
  constexpr size_t kPrefix = offsetof(ShardkitBackendPlugin, abi_version) + sizeof(uint32_t);
  if (p == nullptr) return absl::FailedPreconditionError("ShardkitGetBackendPlugin returned null");
  if (p->struct_size < kPrefix) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin struct of ", p->struct_size, " bytes has no ABI version"));
  }
  if (p->abi_version != SHARDKIT_BACKEND_PLUGIN_ABI_VERSION) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin ABI version ", p->abi_version, ", this shardkit has plugin ABI version ",
        SHARDKIT_BACKEND_PLUGIN_ABI_VERSION, " (rebuild the plugin with this shardkit)"));
  }
  if (p->struct_size < SHARDKIT_BACKEND_PLUGIN_V1_SIZE) {
    return absl::FailedPreconditionError(
        absl::StrCat("plugin struct of ", p->struct_size, " bytes, ABI version ", p->abi_version,
                     " has at least ", SHARDKIT_BACKEND_PLUGIN_V1_SIZE));
  }
  const std::string build_id = p->build_id != nullptr ? p->build_id : "";
  if (build_id != expected_build_id) {
    return absl::FailedPreconditionError(absl::StrCat(
        "plugin build ", build_id, ", this shardkit is build ", std::string(expected_build_id),
        " (plugin and program must be built from the same sources)"));
  }
  if (p->name == nullptr || name != p->name) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the plugin is backend \"", p->name != nullptr ? p->name : "", "\", not \"", name, "\""));
  }
  if (p->create_communicator == nullptr) {
    return absl::FailedPreconditionError("the plugin has no communicator factory");
  }
  return absl::OkStatus();
}

// Hands the plugin's allocators to this program's allocator table.
absl::Status RegisterPluginAllocators(const ShardkitBackendPlugin& p) {
  for (size_t i = 0; i < p.num_allocators; ++i) {
    const ShardkitPluginAllocator& entry = p.allocators[i];
    Allocator* allocator = entry.get != nullptr ? entry.get() : nullptr;
    if (allocator == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat("the plugin's allocator ", i, " is null"));
    }
    RegisterAllocator(entry.device_type, allocator);
  }
  return absl::OkStatus();
}

// dlopen, entry point, checks, allocators. Errors: kFailedPrecondition with the bare reason.
absl::StatusOr<LoadedBackend> OpenPlugin(const std::string& path, const std::string& name,
                                         std::string_view expected_build_id) {
  void* handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) return absl::FailedPreconditionError(::dlerror());
  auto get = reinterpret_cast<ShardkitGetBackendPluginFn>(::dlsym(handle, kBackendPluginSymbol));
  if (get == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("not a shardkit backend plugin (no ", kBackendPluginSymbol, ")"));
  }
  const ShardkitBackendPlugin* plugin = get();
  SHARDKIT_RETURN_IF_ERROR(CheckPlugin(plugin, name, expected_build_id));
  SHARDKIT_RETURN_IF_ERROR(RegisterPluginAllocators(*plugin));
  LoadedBackend backend{name, path, plugin->build_id, plugin->create_communicator};
  // An appended field: read only when the plugin's struct has it.
  auto has = [plugin](size_t offset, size_t size) { return plugin->struct_size >= offset + size; };
  if (has(offsetof(ShardkitBackendPlugin, describe), sizeof(plugin->describe))) {
    backend.describe = plugin->describe;
  }
  if (has(offsetof(ShardkitBackendPlugin, bind_host_memory), sizeof(plugin->bind_host_memory)) &&
      plugin->bind_host_memory != nullptr) {
    plugin->bind_host_memory(OwnHostMemory());
  }
  return backend;
}

// What the plugin says of itself (its describe field), or OK and "" when it says nothing.
absl::StatusOr<std::string> Describe(const LoadedBackend& backend) {
  if (backend.describe == nullptr) return std::string();
  char text[1024] = {};
  const int verdict = backend.describe(text, sizeof(text));
  text[sizeof(text) - 1] = '\0';
  if (verdict != 0) return absl::FailedPreconditionError(text);
  return std::string(text);
}

absl::StatusOr<LoadedBackend> LoadCached(const std::string& path, const std::string& name,
                                         std::string_view expected_build_id) {
  PluginCache& cache = Cache();
  std::lock_guard<std::mutex> lock(cache.mu);
  auto it = cache.loaded.find(path);
  if (it != cache.loaded.end() && it->second.name == name &&
      it->second.build_id == expected_build_id) {
    return it->second;
  }
  SHARDKIT_ASSIGN_OR_RETURN(LoadedBackend backend, OpenPlugin(path, name, expected_build_id));
  cache.loaded[path] = backend;
  return backend;
}

absl::Status NotFound(const std::string& name, const std::vector<std::string>& dirs) {
  const std::vector<std::string> built_in = RegisteredBackends();
  return absl::NotFoundError(absl::StrCat(
      "backend \"", name, "\" not found: built in: ",
      built_in.empty() ? std::string("none") : absl::StrJoin(built_in, ", "), "; no ",
      PluginFileName(name), " in: ", absl::StrJoin(dirs, ", "), " (set ", env::kPluginPath, ")"));
}

// The names of the plugin files in `dir`, sorted.
std::vector<std::string> PluginNamesIn(const std::string& dir) {
  std::vector<std::string> names;
  DIR* d = ::opendir(dir.c_str());
  if (d == nullptr) return names;
  while (const dirent* entry = ::readdir(d)) {
    absl::string_view file = entry->d_name;
    if (!absl::ConsumePrefix(&file, kPluginPrefix) || !absl::ConsumeSuffix(&file, kPluginSuffix)) {
      continue;
    }
    if (ValidName(std::string_view(file.data(), file.size()))) names.emplace_back(file);
  }
  ::closedir(d);
  std::sort(names.begin(), names.end());
  return names;
}

std::string BuildText(const LoadedBackend& backend) {
  return absl::StrCat(backend.name, backend.path.empty() ? " built in" : " plugin", ", build ",
                      backend.build_id);
}

}  // namespace

std::string PluginFileName(std::string_view name) {
  return absl::StrCat(kPluginPrefix, std::string(name), kPluginSuffix);
}

std::vector<std::string> PluginSearchPath() {
  std::vector<std::string> dirs;
  auto add = [&](std::string dir) {
    while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
    if (!dir.empty() && std::find(dirs.begin(), dirs.end(), dir) == dirs.end()) dirs.push_back(dir);
  };
  if (const char* path = std::getenv(env::kPluginPath)) {
    for (absl::string_view dir : absl::StrSplit(path, ':', absl::SkipEmpty())) {
      add(std::string(dir));
    }
  }
  const std::string exe_dir = ExecutableDir();
  if (!exe_dir.empty()) {
    add(Parent(exe_dir) + "/lib/shardkit");
    add(exe_dir);
  }
  AddedDirectories& added = Added();
  std::lock_guard<std::mutex> lock(added.mu);
  for (const std::string& dir : added.dirs) add(dir);
  return dirs;
}

void AddPluginDirectory(const std::string& dir) {
  AddedDirectories& added = Added();
  std::lock_guard<std::mutex> lock(added.mu);
  added.dirs.push_back(dir);
}

absl::StatusOr<LoadedBackend> FindBackendOrPlugin(const std::string& name) {
  if (!ValidName(name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("backend name \"", name,
                     "\" must be lowercase letters, digits, '_' and '-' (e.g. \"nccl\")"));
  }
  if (absl::StatusOr<BackendFactory> built_in = FindBackend(name); built_in.ok()) {
    return LoadedBackend{name, "", BuildId(), *built_in};
  }
  const std::vector<std::string> dirs = PluginSearchPath();
  for (const std::string& dir : dirs) {
    const std::string path = absl::StrCat(dir, "/", PluginFileName(name));
    if (IsFile(path)) return LoadBackendPlugin(path, name, BuildId());
  }
  return NotFound(name, dirs);
}

absl::StatusOr<LoadedBackend> LoadBackendPlugin(const std::string& path, const std::string& name,
                                                std::string_view expected_build_id) {
  absl::StatusOr<LoadedBackend> backend = LoadCached(path, name, expected_build_id);
  if (!backend.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("backend \"", name, "\": plugin ", path, ": ", backend.status().message()));
  }
  return backend;
}

std::vector<AvailableBackend> AvailableBackends() {
  std::vector<AvailableBackend> found;
  std::set<std::string> seen;
  for (const std::string& name : RegisteredBackends()) {
    found.push_back({name, "", absl::OkStatus()});
    seen.insert(name);
  }
  for (const std::string& dir : PluginSearchPath()) {
    for (const std::string& name : PluginNamesIn(dir)) {
      if (!seen.insert(name).second) continue;
      const std::string path = absl::StrCat(dir, "/", PluginFileName(name));
      absl::StatusOr<LoadedBackend> loaded = LoadCached(path, name, BuildId());
      AvailableBackend& backend = found.emplace_back(AvailableBackend{name, path, loaded.status()});
      if (!loaded.ok()) continue;
      absl::StatusOr<std::string> description = Describe(*loaded);
      backend.usable = description.status();
      if (description.ok()) backend.description = *std::move(description);
    }
  }
  return found;
}

absl::Status AgreeOnBackendBuild(Communicator& comm, const LoadedBackend& backend) {
  const std::string mine = BuildText(backend);
  SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> all, comm.AllGather(ConstBuffer(mine)));
  if (std::all_of(all.begin(), all.end(), [&](const std::string& s) { return s == all[0]; })) {
    return absl::OkStatus();
  }
  std::vector<std::pair<int, std::string_view>> builds;
  for (size_t r = 0; r < all.size(); ++r) builds.emplace_back(static_cast<int>(r), all[r]);
  return absl::FailedPreconditionError(absl::StrCat(
      "the ranks run different shardkit builds (every rank must use the same build of backend \"",
      backend.name, "\"): ", GroupByMessage(builds)));
}

}  // namespace shardkit
