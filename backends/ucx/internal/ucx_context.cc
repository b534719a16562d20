#include "backends/ucx/internal/ucx_context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "core/base/status_macros.h"

namespace shardkit::ucx_backend {
namespace {

// UCX's transport aliases (UCX_TLS=sm, …) and the transports each stands for.
const std::map<std::string, std::vector<std::string>>& Aliases() {
  static const auto* aliases = new std::map<std::string, std::vector<std::string>>{
      {"sm", {"posix", "sysv", "xpmem", "knem", "cma"}},
      {"shm", {"posix", "sysv", "xpmem", "knem", "cma"}},
      {"mm", {"posix", "sysv", "xpmem"}},
      {"ib", {"rc_verbs", "ud_verbs", "rc_mlx5", "ud_mlx5", "dc_mlx5"}},
      {"rc", {"rc_verbs", "rc_mlx5"}},
      {"rc_v", {"rc_verbs"}},
      {"rc_x", {"rc_mlx5"}},
      {"ud", {"ud_verbs", "ud_mlx5"}},
      {"ud_v", {"ud_verbs"}},
      {"ud_x", {"ud_mlx5"}},
      {"dc", {"dc_mlx5"}},
      {"dc_x", {"dc_mlx5"}},
      {"cuda", {"cuda_copy", "cuda_ipc", "gdr_copy"}},
      {"rocm", {"rocm_copy", "rocm_ipc", "rocm_gdr"}},
  };
  return *aliases;
}

// The transports UCX_TLS's value names, without ":aux" suffixes; none for an unset value or an
// exclusion list ("^tcp"), which ask for nothing.
std::vector<std::string> RequestedNames(const char* ucx_tls) {
  std::vector<std::string> names;
  if (ucx_tls == nullptr || *ucx_tls == '^') return names;
  for (absl::string_view entry : absl::StrSplit(ucx_tls, ',', absl::SkipWhitespace())) {
    // "tcp:aux" names tcp for wireup only.
    names.emplace_back(absl::StripAsciiWhitespace(entry.substr(0, entry.find(':'))));
  }
  return names;
}

bool Has(const std::vector<std::string>& found, const std::string& name) {
  return std::find(found.begin(), found.end(), name) != found.end();
}

// A context with `modify` applied to the environment's configuration.
absl::StatusOr<ucp_context_h> CreateContext(
    const UcpLibrary& ucp, const std::vector<std::pair<const char*, const char*>>& modify) {
  ucp_config_t* config = nullptr;
  ucs_status_t status = ucp.config_read(nullptr, nullptr, &config);
  if (status != UCS_OK) {
    return absl::InternalError(absl::StrCat("ucp_config_read: ", ucp.Text(status)));
  }
  for (const auto& [name, value] : modify) {
    if (status == UCS_OK) status = ucp.config_modify(config, name, value);
  }
  ucp_params_t params{};
  params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_MT_WORKERS_SHARED;
  params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
  params.mt_workers_shared = 1;
  ucp_context_h context = nullptr;
  if (status == UCS_OK) {
    status = ucp.init_version(UCP_API_MAJOR, UCP_API_MINOR, &params, config, &context);
  }
  ucp.config_release(config);
  if (status != UCS_OK) {
    return absl::InternalError(absl::StrCat("creating the UCP context: ", ucp.Text(status)));
  }
  return context;
}

// The failure rules' options (see ucx_context.h), unless the environment sets them.
std::vector<std::pair<const char*, const char*>> BackendOptions() {
  std::vector<std::pair<const char*, const char*>> options;
  if (std::getenv("UCX_KEEPALIVE_INTERVAL") == nullptr)
    options.push_back({"KEEPALIVE_INTERVAL", "1s"});
  return options;
}

absl::StatusOr<UcxContext> Create() {
  SHARDKIT_ASSIGN_OR_RETURN(const UcpLibrary* ucp, LoadUcp());
  if (const char* tls = std::getenv("UCX_TLS"); tls != nullptr && *tls != '\0') {
    SHARDKIT_ASSIGN_OR_RETURN(std::vector<std::string> found, HostTransports());
    SHARDKIT_RETURN_IF_ERROR(CheckRequestedTransports(found, tls));
  }
  SHARDKIT_ASSIGN_OR_RETURN(ucp_context_h context, CreateContext(*ucp, BackendOptions()));
  return UcxContext{ucp, context};
}

}  // namespace

absl::StatusOr<UcxContext> SharedContext() {
  static std::once_flag once;
  static absl::StatusOr<UcxContext>* shared = nullptr;
  std::call_once(once, [] { shared = new absl::StatusOr<UcxContext>(Create()); });
  return *shared;
}

std::vector<std::string> TransportsInInfo(const std::string& info) {
  std::vector<std::string> found;
  for (absl::string_view line : absl::StrSplit(info, '\n')) {
    // "#      resource 1  :  md 1  dev 1  flags -- tcp/lo"
    if (line.find("resource") == absl::string_view::npos) continue;
    const size_t dashes = line.find("-- ");
    if (dashes == absl::string_view::npos) continue;
    absl::string_view tl = line.substr(dashes + 3);
    tl = tl.substr(0, tl.find('/'));
    const std::string name(absl::StripAsciiWhitespace(tl));
    if (!name.empty() && !Has(found, name)) found.push_back(name);
  }
  return found;
}

absl::StatusOr<std::vector<std::string>> HostTransports() {
  SHARDKIT_ASSIGN_OR_RETURN(const UcpLibrary* ucp, LoadUcp());
  SHARDKIT_ASSIGN_OR_RETURN(ucp_context_h context, CreateContext(*ucp, {{"TLS", "all"}}));
  auto print = [&](FILE* out) { ucp->context_print_info(context, out); };
  const std::string info = PrintedText(print);
  ucp->cleanup(context);
  return TransportsInInfo(info);
}

absl::Status CheckRequestedTransports(const std::vector<std::string>& found, const char* ucx_tls) {
  std::vector<std::string> missing;
  for (const std::string& name : RequestedNames(ucx_tls)) {
    if (name == "all" || Has(found, name)) continue;
    const auto alias = Aliases().find(name);
    bool any = false;
    if (alias != Aliases().end()) {
      for (const std::string& tl : alias->second) any = any || Has(found, tl);
    }
    if (!any) missing.push_back(name);
  }
  if (missing.empty()) return absl::OkStatus();
  return absl::FailedPreconditionError(absl::StrCat(
      "UCX_TLS asks for ", absl::StrJoin(missing, ", "), ", which this host lacks (found: ",
      found.empty() ? std::string("none") : absl::StrJoin(found, ", "), ")"));
}

bool SharedMemoryAllowed(const char* ucx_tls) {
  const std::vector<std::string> names = RequestedNames(ucx_tls);
  if (names.empty()) return true;  // unset, empty, or an exclusion list: UCX's own choice
  static const auto* local =
      new std::set<std::string>{"all", "sm", "shm", "mm", "posix", "sysv", "xpmem", "cma", "knem"};
  return std::any_of(names.begin(), names.end(),
                     [](const std::string& name) { return local->count(name) > 0; });
}

int DescribeUcx(char* text, size_t capacity) {
  absl::StatusOr<std::vector<std::string>> found = HostTransports();
  absl::Status usable = found.status();
  if (usable.ok()) usable = CheckRequestedTransports(*found, std::getenv("UCX_TLS"));
  const std::string line = usable.ok() ? absl::StrCat("transports: ", absl::StrJoin(*found, ", "))
                                       : std::string(usable.message());
  if (capacity > 0) std::snprintf(text, capacity, "%s", line.c_str());
  return usable.ok() ? 0 : 1;
}

}  // namespace shardkit::ucx_backend
