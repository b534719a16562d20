// TensorSelection and SelectedSource over an in-memory source: which names are picked, renamed,
// re-sorted over a region of their own and read from the right tensor; idle patterns (warnings,
// errors under strict), names without the prefix, collisions, an empty result.
#include "integration/checkpoint/source/selected_source.h"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "testing/status_matchers.h"

namespace shardkit::checkpoint {
namespace {

using ::shardkit::testing::IsOk;
using ::shardkit::testing::StatusIs;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// Tensor t holds bytes equal to t, one per element (U8 vectors of the given lengths).
class FakeSource : public TensorSource {
 public:
  FakeSource(const std::vector<std::string>& names, const std::vector<int64_t>& sizes) {
    uint64_t at = 0;
    for (size_t i = 0; i < names.size(); ++i) {
      header_.tensors.push_back(
          {names[i], DType::kUInt8, {sizes[i]}, at, at + static_cast<uint64_t>(sizes[i])});
      at += static_cast<uint64_t>(sizes[i]);
    }
    header_.metadata["format"] = "pt";
  }
  const safetensors::Header& header() const override { return header_; }
  const std::vector<CheckpointFile>& identity() const override { return identity_; }
  absl::Status ReadBytes(size_t t, int64_t offset, int64_t size, std::byte* dst) const override {
    std::memset(dst, static_cast<int>(t), static_cast<size_t>(size));
    return absl::OkStatus();
  }
  absl::Status CheckUnchanged(size_t) const override { return absl::OkStatus(); }
  const void* FilesOf(size_t) const override { return this; }

 private:
  safetensors::Header header_;
  std::vector<CheckpointFile> identity_;
};

std::unique_ptr<TensorSource> Training() {
  return std::make_unique<FakeSource>(
      std::vector<std::string>{"model.b", "model.layers.0.w", "model.z",
                               "optimizer.state.model.b.exp_avg", "train_state.ntokens"},
      std::vector<int64_t>{2, 3, 4, 5, 1});
}

std::vector<std::string> Names(const TensorSource& source) {
  std::vector<std::string> names;
  for (const auto& info : source.header().tensors) names.push_back(info.name);
  return names;
}

TEST(SelectedSourceTest, IncludeExcludeAndStripPrefix) {
  std::vector<std::string> warnings;
  TensorSelection select{.include = {"model.**"}, .exclude = {"**.z"}, .strip_prefix = "model."};
  ASSERT_THAT(ValidateSelection(select), IsOk());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<TensorSource> picked,
                                SelectTensors(Training(), select, {}, &warnings));
  EXPECT_THAT(Names(*picked), ElementsAre("b", "layers.0.w"));
  EXPECT_THAT(warnings, IsEmpty());
  const auto& tensors = picked->header().tensors;
  EXPECT_EQ(tensors[1].begin, 2u);  // a region of their own
  EXPECT_EQ(tensors[1].end, 5u);
  EXPECT_EQ(picked->header().metadata.at("format"), "pt");
  std::byte byte{};
  ASSERT_THAT(picked->ReadBytes(1, 0, 1, &byte), IsOk());
  EXPECT_EQ(byte, std::byte{1});  // "model.layers.0.w", tensor 1 of the source
  EXPECT_TRUE(select.Picks("model.layers.0.w"));
  EXPECT_FALSE(select.Picks("model.z"));
  EXPECT_FALSE(select.Picks("train_state.ntokens"));
}

TEST(SelectedSourceTest, RenamedTensorsAreInNameOrder) {
  std::vector<std::string> warnings;
  TensorSelection select{.strip_prefix = "optimizer.state."};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<TensorSource> picked,
                                SelectTensors(Training(), select, {}, &warnings));
  EXPECT_THAT(Names(*picked), ElementsAre("model.b", "model.b.exp_avg", "model.layers.0.w",
                                          "model.z", "train_state.ntokens"));
  std::byte byte{};
  ASSERT_THAT(picked->ReadBytes(1, 0, 1, &byte), IsOk());
  EXPECT_EQ(byte, std::byte{3});
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], HasSubstr("4 of the 5 tensors picked do not begin with --strip-prefix "
                                     "\"optimizer.state.\" and keep their names: model.b, "
                                     "model.layers.0.w, model.z, ..."));
}

TEST(SelectedSourceTest, IdlePatternsWarnOrFailUnderStrict) {
  std::vector<std::string> warnings;
  TensorSelection select{.include = {"model.**", "opt.**", "train_state.step"},
                         .exclude = {"**.bias"}};
  SHARDKIT_ASSERT_OK_AND_ASSIGN(
      std::unique_ptr<TensorSource> picked,
      SelectTensors(Training(), select, {"train_state.step"}, &warnings));  // an item counts
  EXPECT_THAT(warnings, ElementsAre("warning: --include \"opt.**\" matches no name in the "
                                    "checkpoint",
                                    "warning: --exclude \"**.bias\" matches no name in the "
                                    "checkpoint"));
  select.strict = true;
  EXPECT_THAT(SelectTensors(Training(), select, {"train_state.step"}, &warnings),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--include \"opt.**\" matches no name in the checkpoint "
                                 "(--strict)")));
}

TEST(SelectedSourceTest, ErrorsNameWhatIsWrong) {
  std::vector<std::string> warnings;
  EXPECT_THAT(ValidateSelection({.exclude = {"a**"}}),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("--exclude \"a**\": ")));
  EXPECT_THAT(SelectTensors(Training(), {.include = {"nothing.*"}}, {}, &warnings),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--include/--exclude leave none of the 5 tensors")));
  auto clash = std::make_unique<FakeSource>(std::vector<std::string>{"m.w", "w"},
                                            std::vector<int64_t>{1, 1});
  EXPECT_THAT(SelectTensors(std::move(clash), {.strip_prefix = "m."}, {}, &warnings),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       HasSubstr("--strip-prefix \"m.\" gives \"m.w\" and \"w\" the same name "
                                 "\"w\"")));
}

TEST(SelectedSourceTest, AnEmptySelectionIsTheSourceItself) {
  std::unique_ptr<TensorSource> source = Training();
  const TensorSource* raw = source.get();
  std::vector<std::string> warnings;
  SHARDKIT_ASSERT_OK_AND_ASSIGN(std::unique_ptr<TensorSource> same,
                                SelectTensors(std::move(source), {}, {}, &warnings));
  EXPECT_EQ(same.get(), raw);
}

}  // namespace
}  // namespace shardkit::checkpoint
