// Test helpers of the DCP readers: where the fixtures are (testdata/, written by torch itself with
// make_fixtures.py), and `.metadata` pickles written the way torch 2.15 writes them (the same
// dataclasses, fields and opcodes, with memoized globals and keys; PickleWriter, pickle_writer.h),
// from a short description — so that tests can build what torch would never write (chunks that
// overlap, a forbidden field) and what would take torch minutes to write (a million chunks).
//
//   std::string bytes = FakeMetadata({{.fqn = "w", .shape = {4},
//                                      .chunks = {{.offsets = {0}, .sizes = {4}}}}});
#ifndef SHARDKIT_INTEGRATION_FORMATS_DCP_TEST_UTIL_H_
#define SHARDKIT_INTEGRATION_FORMATS_DCP_TEST_UTIL_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "core/tensor/shape.h"

namespace shardkit::dcp::testing {

// The path of testdata/`name` in the test's runfiles.
std::string FixturePath(const std::string& name);

struct FakeChunk {
  Shape offsets;
  Shape sizes;
  std::string file = "__0_0.distcp";
  int64_t offset = 0;
  int64_t length = 1000;
};

struct FakeTensor {
  std::string fqn;
  std::string dtype = "float32";  // torch's name
  Shape shape;
  std::vector<FakeChunk> chunks;
  // Instead of `chunks`, when set: chunk i of `generated_count` is generate(i) (a million chunks
  // without a million in memory twice).
  std::function<FakeChunk(size_t)> generate;
  size_t generated_count = 0;

  size_t chunk_count() const { return generate ? generated_count : chunks.size(); }
  FakeChunk chunk(size_t i) const { return generate ? generate(i) : chunks[i]; }
};

struct FakeOptions {
  std::string layout = "torch.strided";
  // On every item: "" none, "list" ["stream.zstd"] (DCP's compression), "int" 5 (no list at all).
  std::string transform_descriptors;
  bool extra_storage_entry = false;  // one storage_data entry that belongs to nothing
  std::string extra_chunk_field;     // a field ChunkStorageMetadata does not have
  bool share_chunk = false;          // every chunk of a tensor the memo's first chunk object
};

std::string FakeMetadata(const std::vector<FakeTensor>& tensors, const FakeOptions& options = {});

}  // namespace shardkit::dcp::testing

#endif  // SHARDKIT_INTEGRATION_FORMATS_DCP_TEST_UTIL_H_
