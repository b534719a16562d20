// Registers the UCX backend as the built-in backend "ucx", for the test programs that fork their
// ranks (the conformance and engine suites); programs load the plugin (ucx_plugin.cc).
#include "backends/ucx/ucx_communicator.h"
#include "core/comm/backend_registry.h"

namespace shardkit::ucx_backend {

SHARDKIT_REGISTER_BACKEND("ucx", &CreateUcxCommunicator);

}  // namespace shardkit::ucx_backend
