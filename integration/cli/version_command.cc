// `shardkit --version`: the version and build id, then one line per backend this program can find
// (core/comm/backend_loader.h): built in, or a plugin on the search path and whether it loads.
//
//   shardkit 0.1.0 (build 3f9a0c1d2b4e5f67)
//   gloo: built in
//   nccl: plugin /opt/shardkit/lib/shardkit/libshardkit_backend_nccl.so
//   ucx: plugin /opt/shardkit/lib/shardkit/libshardkit_backend_ucx.so (transports: self, tcp, cma)
//   mpi: plugin /opt/shardkit/lib/shardkit/libshardkit_backend_mpi.so: not loadable: <reason>
//
// Exit 0; 1 when a plugin that loads says it cannot be used here (the UCX plugin when UCX_TLS asks
// for a transport this host lacks): its line is then "ucx: plugin PATH: not usable: <reason>".
#include <iostream>

#include "core/comm/backend_loader.h"
#include "core/comm/build_id.h"
#include "integration/cli/commands.h"

namespace shardkit::cli {

int RunVersion(const std::vector<std::string>& args) {
  if (!args.empty()) {
    std::cerr << "shardkit --version: takes no arguments, got \"" << args[0] << "\"\n";
    return 2;
  }
  std::cout << "shardkit " << kShardkitVersion << " (build " << BuildId() << ")\n";
  int exit_code = 0;
  for (const AvailableBackend& backend : AvailableBackends()) {
    std::cout << backend.name << ": ";
    if (backend.path.empty()) {
      std::cout << "built in\n";
    } else if (backend.loadable.ok() && !backend.usable.ok()) {
      std::cout << "plugin " << backend.path << ": not usable: " << backend.usable.message()
                << "\n";
      exit_code = 1;
    } else if (backend.loadable.ok()) {
      std::cout << "plugin " << backend.path;
      if (!backend.description.empty()) std::cout << " (" << backend.description << ")";
      std::cout << "\n";
    } else {
      std::cout << "plugin " << backend.path << ": not loadable: " << backend.loadable.message()
                << "\n";
    }
  }
  return exit_code;
}

}  // namespace shardkit::cli
