// Where a test puts its files: under $TEST_TMPDIR (Bazel's per-test temporary directory; the
// system temporary directory outside Bazel). The one temp-dir helper of shardkit's tests.
//
//   const std::string dir = testing::FreshTestDir("roundtrip");   // new and empty, per call
//   const std::string ck = testing::TestPath("model.safetensors");  // same in every process
//
// FreshTestDir names a directory after the calling process and a counter: call it in the test's
// own process and pass the path to forked ranks. TestPath names the same path in every process of
// the test (forked ranks included) and creates nothing.
#ifndef SHARDKIT_TESTING_TEST_DIR_H_
#define SHARDKIT_TESTING_TEST_DIR_H_

#include <string>
#include <string_view>

namespace shardkit::testing {

// A fresh, empty directory under $TEST_TMPDIR, named `stem`-PID-N, for stores and outputs of one
// test.
std::string FreshTestDir(std::string_view stem);

// $TEST_TMPDIR/`name` (`name` may hold directories; nothing is created).
std::string TestPath(std::string_view name);

}  // namespace shardkit::testing

#endif  // SHARDKIT_TESTING_TEST_DIR_H_
