// The NCCL plugin loaded by name into a program that has no CUDA and no NCCL in it (only Gloo is
// built in): found on SHARDKIT_PLUGIN_PATH, of this build, and its CUDA allocator handed to the
// host through the plugin struct. Runs on every machine of the cuda configuration: without a GPU,
// allocating and connecting end in the plugin's "no CUDA device"; with one, they succeed. The
// CUDA work happens in a forked child, so this process never initialises CUDA.
#include <cstdlib>
#include <string>

#include "absl/strings/str_cat.h"
#include "core/comm/backend_loader.h"
#include "core/comm/backend_registry.h"
#include "core/comm/build_id.h"
#include "core/comm/connect.h"
#include "core/tensor/tensor.h"
#include "gmock/gmock.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;

// OK, or the plugin's clean "no CUDA device" (never the host's "no allocator").
void ExpectOkOrNoCudaDevice(const absl::Status& status) {
  if (status.ok()) return;
  EXPECT_THAT(status, StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no CUDA device")));
}

TEST(NcclPlugin, LoadedByNameBringsItsCudaAllocator) {
  const std::string dir = absl::StrCat(std::getenv("TEST_SRCDIR"), "/shardkit/backends/nccl");
  setenv("SHARDKIT_PLUGIN_PATH", dir.c_str(), 1);
  EXPECT_THAT(RegisteredBackends(), ::testing::ElementsAre("gloo"));
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [&](int, const std::string&) {
    EXPECT_THAT(
        Tensor::Empty({4}, DType::kFloat32, Device::Cuda()),
        StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("no allocator for device cuda")));
    SHARDKIT_ASSERT_OK_AND_ASSIGN(LoadedBackend nccl, FindBackendOrPlugin("nccl"));
    EXPECT_EQ(nccl.path, dir + "/libshardkit_backend_nccl.so");
    EXPECT_EQ(nccl.build_id, BuildId());
    ExpectOkOrNoCudaDevice(Tensor::Empty({4}, DType::kFloat32, Device::Cuda()).status());
    ConnectOptions options;
    options.backend = "nccl";
    ExpectOkOrNoCudaDevice(Connect(options).status());
  }));
}

}  // namespace
}  // namespace shardkit
