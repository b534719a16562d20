// libshardkit_backend_testgloo.so: the Gloo backend wrapped as a plugin named "testgloo", for the
// loader tests (a plugin that really loads and really connects ranks over TCP).
#include "backends/gloo/gloo_communicator.h"
#include "core/comm/backend_plugin.h"

SHARDKIT_BACKEND_PLUGIN("testgloo", &shardkit::gloo_backend::CreateGlooCommunicator);
