#include "core/engine/module.h"

#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(ModuleTest, KeepsInsertionOrder) {
  Module m;
  for (const char* name : {"z.weight", "a.bias", "encoder.layers.0.weight"}) {
    SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Zeros({2}, DType::kFloat32));
    ASSERT_THAT(m.AddParameter(name, t), IsOk());
  }
  EXPECT_THAT(m.names(), ElementsAre("z.weight", "a.bias", "encoder.layers.0.weight"));
  EXPECT_TRUE(m.Contains("a.bias"));
  EXPECT_FALSE(m.Contains("a"));
}

TEST(ModuleTest, GetSetAndErrors) {
  Module m;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor t, Tensor::Arange({3}, DType::kInt32));
  ASSERT_THAT(m.AddParameter("w", t), IsOk());
  EXPECT_THAT(m.AddParameter("w", t),
              StatusIs(absl::StatusCode::kAlreadyExists, HasSubstr("parameter w already")));
  SHARDKIT_ASSERT_OK_AND_ASSIGN(const Tensor* got, m.GetTensor("w"));
  EXPECT_EQ(got->storage(), t.storage());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(Tensor meta, Tensor::Meta({3}, DType::kInt32));
  ASSERT_THAT(m.SetTensor("w", meta), IsOk());
  EXPECT_TRUE((*m.GetTensor("w"))->is_meta());
  EXPECT_THAT(m.GetTensor("v"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"v\"")));
  EXPECT_THAT(m.MutableTensor("v"), StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"v\"")));
  EXPECT_THAT(m.SetTensor("v", meta), StatusIs(absl::StatusCode::kNotFound, HasSubstr("\"v\"")));
}

TEST(ModuleTest, RejectsBadNames) {
  Module m;
  for (const char* bad : {"", ".a", "a.", "a..b", "a b", "a\tb", "caf\xc3\xa9"}) {
    EXPECT_THAT(m.AddParameter(bad, Tensor()),
                StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("parameter name")))
        << bad;
  }
  EXPECT_EQ(m.size(), 0u);
}

}  // namespace
}  // namespace shardkit
