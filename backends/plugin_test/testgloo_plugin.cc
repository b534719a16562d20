// libshardkit_backend_testgloo.so: the Gloo backend wrapped as a plugin named "testgloo", for the
// loader tests (a plugin that really loads and really connects ranks over TCP). It describes
// itself (the ABI's appended describe field): "transports: tcp", or, with
// SHARDKIT_TESTGLOO_UNUSABLE set, that it cannot be used here.
#include <cstdio>
#include <cstdlib>

#include "backends/gloo/gloo_communicator.h"
#include "core/comm/backend_plugin.h"

namespace {

int Describe(char* text, size_t capacity) {
  const bool unusable = std::getenv("SHARDKIT_TESTGLOO_UNUSABLE") != nullptr;
  std::snprintf(text, capacity, "%s",
                unusable ? "SHARDKIT_TESTGLOO_UNUSABLE is set" : "transports: tcp");
  return unusable ? 1 : 0;
}

}  // namespace

SHARDKIT_BACKEND_PLUGIN_DESCRIBED("testgloo", &shardkit::gloo_backend::CreateGlooCommunicator,
                                  &Describe);
