// libshardkit_backend_testgloo.so: the Gloo backend wrapped as a plugin named "testgloo", for the
// loader tests (a plugin that really loads and really connects ranks over TCP). It describes
// itself (the ABI's appended describe field): "transports: tcp", or, with
// SHARDKIT_TESTGLOO_UNUSABLE set, that it cannot be used here; with SHARDKIT_TESTGLOO_PROBE set to
// a hex address of the host's, what its copy of core finds there (core/tensor/host_memory.h).
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "backends/gloo/gloo_communicator.h"
#include "core/comm/backend_plugin.h"
#include "core/tensor/host_memory.h"

namespace {

int Describe(char* text, size_t capacity) {
  const bool unusable = std::getenv("SHARDKIT_TESTGLOO_UNUSABLE") != nullptr;
  if (const char* probe = std::getenv("SHARDKIT_TESTGLOO_PROBE"); probe != nullptr && !unusable) {
    // This plugin's copy of core asked about an address of the host's.
    const void* at = reinterpret_cast<const void*>(std::strtoull(probe, nullptr, 16));
    const std::optional<shardkit::CpuBlock> block = shardkit::FindHostCpuBlock(at, 1);
    if (block.has_value()) {
      std::snprintf(text, capacity, "host block %p of %zu bytes", block->base, block->bytes);
    } else {
      std::snprintf(text, capacity, "no host block");
    }
    return 0;
  }
  std::snprintf(text, capacity, "%s",
                unusable ? "SHARDKIT_TESTGLOO_UNUSABLE is set" : "transports: tcp");
  return unusable ? 1 : 0;
}

}  // namespace

SHARDKIT_BACKEND_PLUGIN_DESCRIBED("testgloo", &shardkit::gloo_backend::CreateGlooCommunicator,
                                  &Describe);
