#include "backends/ucx/internal/ucp_library.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#include "absl/strings/str_cat.h"

namespace shardkit::ucx_backend {
namespace {

constexpr char kLibrary[] = "libucp.so.0";

// Resolves `name` into `fn`; false (and `error` set) when it is missing.
template <typename Fn>
bool Resolve(void* handle, const char* name, Fn& fn, std::string& error) {
  fn = reinterpret_cast<Fn>(::dlsym(handle, name));
  if (fn == nullptr && error.empty()) error = absl::StrCat(kLibrary, " has no ", name);
  return fn != nullptr;
}

absl::StatusOr<const UcpLibrary*> Open() {
  SetUcxDefaults();
  void* handle = ::dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot load UCX (install libucx0, UCX 1.13 or later): ", ::dlerror()));
  }
  auto* ucp = new UcpLibrary();
  std::string error;
  Resolve(handle, "ucp_config_read", ucp->config_read, error);
  Resolve(handle, "ucp_config_modify", ucp->config_modify, error);
  Resolve(handle, "ucp_config_release", ucp->config_release, error);
  Resolve(handle, "ucp_init_version", ucp->init_version, error);
  Resolve(handle, "ucp_cleanup", ucp->cleanup, error);
  Resolve(handle, "ucp_context_print_info", ucp->context_print_info, error);
  Resolve(handle, "ucp_worker_create", ucp->worker_create, error);
  Resolve(handle, "ucp_worker_destroy", ucp->worker_destroy, error);
  Resolve(handle, "ucp_worker_get_address", ucp->worker_get_address, error);
  Resolve(handle, "ucp_worker_release_address", ucp->worker_release_address, error);
  Resolve(handle, "ucp_worker_progress", ucp->worker_progress, error);
  Resolve(handle, "ucp_worker_arm", ucp->worker_arm, error);
  Resolve(handle, "ucp_worker_get_efd", ucp->worker_get_efd, error);
  Resolve(handle, "ucp_ep_create", ucp->ep_create, error);
  Resolve(handle, "ucp_ep_close_nbx", ucp->ep_close_nbx, error);
  Resolve(handle, "ucp_ep_print_info", ucp->ep_print_info, error);
  Resolve(handle, "ucp_tag_send_nbx", ucp->tag_send_nbx, error);
  Resolve(handle, "ucp_tag_recv_nbx", ucp->tag_recv_nbx, error);
  Resolve(handle, "ucp_tag_recv_request_test", ucp->tag_recv_request_test, error);
  Resolve(handle, "ucp_request_check_status", ucp->request_check_status, error);
  Resolve(handle, "ucp_request_cancel", ucp->request_cancel, error);
  Resolve(handle, "ucp_request_free", ucp->request_free, error);
  Resolve(handle, "ucp_mem_map", ucp->mem_map, error);
  Resolve(handle, "ucp_mem_unmap", ucp->mem_unmap, error);
  Resolve(handle, "ucs_status_string", ucp->status_string, error);
  if (!error.empty()) {
    delete ucp;
    return absl::FailedPreconditionError(
        absl::StrCat("UCX is too old (UCX 1.13 or later is needed): ", error));
  }
  return ucp;  // kept until the process ends, like the library
}

}  // namespace

std::string PrintedText(absl::FunctionRef<void(FILE*)> print) {
  char* text = nullptr;
  size_t size = 0;
  FILE* out = ::open_memstream(&text, &size);
  if (out == nullptr) return "";
  print(out);
  std::fclose(out);
  std::string printed = text != nullptr ? std::string(text, size) : std::string();
  std::free(text);
  return printed;
}

void SetUcxDefaults() {
  // overwrite = 0: what the user set wins.
  ::setenv("UCX_HANDLE_ERRORS", "none", 0);
  ::setenv("UCX_MEM_MALLOC_HOOKS", "no", 0);
  ::setenv("UCX_MEM_MMAP_HOOK_MODE", "none", 0);
  ::setenv("UCX_MEMTYPE_CACHE", "n", 0);
}

absl::StatusOr<const UcpLibrary*> LoadUcp() {
  static std::once_flag once;
  static absl::StatusOr<const UcpLibrary*>* loaded = nullptr;
  std::call_once(once, [] { loaded = new absl::StatusOr<const UcpLibrary*>(Open()); });
  return *loaded;
}

}  // namespace shardkit::ucx_backend
