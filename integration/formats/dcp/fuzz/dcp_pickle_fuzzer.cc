// libFuzzer target for the DCP pickle reader and the metadata read from it: the input is the
// bytes of a `.metadata` (or any pickle). Besides "never crash", it checks invariants:
//   - every rejection is kInvalidArgument, by Pickle::Parse and by ParseMetadata;
//   - an accepted pickle's values form an acyclic graph (the memo-cycle rule holds), and every
//     accessor works on every value;
//   - ParseMetadata accepts nothing Pickle::Parse rejects, and what it accepts is checked: every
//     chunk inside its tensor with a storage item.
// Built with clang by `tools/fuzz dcp_pickle` (seeded with the fixtures' metadata and data.pkl
// files); without libFuzzer, //integration/formats/dcp/fuzz:dcp_pickle_fuzzer replays files.
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "core/base/check.h"
#include "integration/formats/dcp/metadata.h"
#include "integration/formats/pickle/pickle_reader.h"

namespace shardkit::dcp {

using ::shardkit::pickle::Pickle;
using ::shardkit::pickle::PickleKind;
namespace {

// Every value is reached without meeting one still on the path: a depth-first walk, iterative
// (a pickle may nest a million deep), colouring each value once.
void CheckAcyclic(const Pickle& pickle) {
  enum Colour : uint8_t { kWhite, kGrey, kBlack };
  std::vector<Colour> colour(pickle.value_count(), kWhite);
  for (Pickle::Id start = 0; start < pickle.value_count(); ++start) {
    if (colour[start] != kWhite) continue;
    std::vector<std::pair<Pickle::Id, std::vector<Pickle::Id>>> path;
    colour[start] = kGrey;
    path.push_back({start, {}});
    auto children = [&](Pickle::Id id) {
      std::vector<Pickle::Id> out = pickle.items(id);
      if (pickle.kind(id) == PickleKind::kObject) {
        out.push_back(pickle.args(id));
        if (pickle.state(id) != Pickle::kNoValue) out.push_back(pickle.state(id));
      }
      return out;
    };
    path.back().second = children(start);
    while (!path.empty()) {
      if (path.back().second.empty()) {
        colour[path.back().first] = kBlack;
        path.pop_back();
        continue;
      }
      const Pickle::Id next = path.back().second.back();
      path.back().second.pop_back();
      SHARDKIT_CHECK(next < pickle.value_count()) << "a link out of range";
      SHARDKIT_CHECK(colour[next] != kGrey) << "a cycle through value " << next;
      if (colour[next] == kWhite) {
        colour[next] = kGrey;
        path.push_back({next, children(next)});
      }
    }
  }
}

void FuzzOne(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<Pickle> pickle = Pickle::Parse(bytes);
  absl::StatusOr<Metadata> metadata = ParseMetadata(bytes, "fuzz", /*require_cover=*/false);
  if (!pickle.ok()) {
    SHARDKIT_CHECK(pickle.status().code() == absl::StatusCode::kInvalidArgument)
        << pickle.status().ToString();
    SHARDKIT_CHECK(!metadata.ok()) << "metadata accepted from a pickle the reader refuses";
    return;
  }
  SHARDKIT_CHECK(pickle->root() < pickle->value_count());
  CheckAcyclic(*pickle);
  for (Pickle::Id id = 0; id < pickle->value_count(); ++id) {
    (void)pickle->Describe(id);
    (void)pickle->text(id);
  }
  if (!metadata.ok()) {
    SHARDKIT_CHECK(metadata.status().code() == absl::StatusCode::kInvalidArgument)
        << metadata.status().ToString();
    return;
  }
  for (const TensorEntry& tensor : metadata->tensors) {
    for (const Chunk& chunk : tensor.chunks) {
      SHARDKIT_CHECK(chunk.offsets.size() == tensor.shape.size());
      for (size_t d = 0; d < tensor.shape.size(); ++d) {
        SHARDKIT_CHECK(chunk.offsets[d] + chunk.sizes[d] <= tensor.shape[d]) << tensor.fqn;
      }
      SHARDKIT_CHECK(!chunk.item.file.empty() && chunk.item.file.find('/') == std::string::npos);
    }
  }
}

}  // namespace
}  // namespace shardkit::dcp

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  shardkit::dcp::FuzzOne(data, size);
  return 0;
}
