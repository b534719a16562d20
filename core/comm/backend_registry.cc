#include "core/comm/backend_registry.h"

#include <map>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "core/base/check.h"

namespace shardkit {
namespace {

struct Registry {
  std::mutex mu;
  std::map<std::string, BackendFactory> factories;  // guarded by mu
};

Registry& GetRegistry() {
  static Registry* registry = new Registry();
  return *registry;
}

}  // namespace

absl::Status RegisterBackend(const std::string& name, BackendFactory factory) {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  if (!registry.factories.emplace(name, factory).second) {
    return absl::AlreadyExistsError(absl::StrCat("backend \"", name, "\" is registered twice"));
  }
  return absl::OkStatus();
}

std::vector<std::string> RegisteredBackends() {
  Registry& registry = GetRegistry();
  std::lock_guard<std::mutex> lock(registry.mu);
  std::vector<std::string> names;
  for (const auto& [name, factory] : registry.factories) names.push_back(name);
  return names;
}

absl::StatusOr<BackendFactory> FindBackend(const std::string& name) {
  {
    Registry& registry = GetRegistry();
    std::lock_guard<std::mutex> lock(registry.mu);
    auto it = registry.factories.find(name);
    if (it != registry.factories.end()) return it->second;
  }
  const std::vector<std::string> names = RegisteredBackends();
  return absl::NotFoundError(
      absl::StrCat("backend \"", name, "\" is not built into this program; available: ",
                   names.empty() ? std::string("none") : absl::StrJoin(names, ", ")));
}

namespace internal {

BackendRegistration::BackendRegistration(const char* name, BackendFactory factory) {
  absl::Status status = RegisterBackend(name, factory);
  SHARDKIT_CHECK(status.ok()) << status.ToString();
}

}  // namespace internal
}  // namespace shardkit
