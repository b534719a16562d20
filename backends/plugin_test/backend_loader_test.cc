// Finding and loading backend plugins (core/comm/backend_loader.h) with real shared objects from
// this package: found on SHARDKIT_PLUGIN_PATH and connecting forked ranks over Gloo, not found,
// dlopen failures (not an ELF file, a missing library), another ABI version, another build id at
// load time and between two ranks, a file named for another backend.
#include "core/comm/backend_loader.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/comm/build_id.h"
#include "core/comm/connect.h"
#include "core/tensor/allocator.h"
#include "gmock/gmock.h"
#include "testing/multiprocess.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

using ::shardkit::testing::StatusIs;
using ::testing::HasSubstr;
using ::testing::StrEq;

constexpr char kOtherBuild[] = "0ther0build0000f";  // other_build/other_build_plugin.cc

// A folder of this package's outputs in the runfiles ("" = the package itself).
std::string RunfilesDir(const std::string& sub = "") {
  return absl::StrCat(std::getenv("TEST_SRCDIR"), "/shardkit/backends/plugin_test",
                      sub.empty() ? "" : "/", sub);
}

std::string Plugin(const std::string& dir, const std::string& name) {
  return absl::StrCat(dir, "/", PluginFileName(name));
}

// The folders PluginSearchPath() adds after SHARDKIT_PLUGIN_PATH: "<exe dir>/../lib/shardkit"
// (written without the ".."), "<exe dir>".
std::vector<std::string> ExecutableDirs() {
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe");
  return {exe.parent_path().parent_path().string() + "/lib/shardkit", exe.parent_path().string()};
}

// Copies `from` into a fresh folder as `file`; returns the folder.
std::string CopyToFreshDir(const std::string& from, const std::string& file) {
  const std::string dir = testing::FreshTestDir("plugins");
  std::filesystem::copy_file(from, dir + "/" + file);
  return dir;
}

class BackendLoaderTest : public ::testing::Test {
 protected:
  void SetPluginPath(const std::string& path) { setenv("SHARDKIT_PLUGIN_PATH", path.c_str(), 1); }
  void TearDown() override { unsetenv("SHARDKIT_PLUGIN_PATH"); }
};

TEST_F(BackendLoaderTest, BuiltInBackendsComeFirst) {
  SetPluginPath(RunfilesDir());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(LoadedBackend gloo, FindBackendOrPlugin("gloo"));
  EXPECT_EQ(gloo.path, "");
  EXPECT_EQ(gloo.build_id, BuildId());
  EXPECT_THAT(BuildId(), ::testing::MatchesRegex("[0-9a-f]{16}"));
}

TEST_F(BackendLoaderTest, SearchPathIsThePluginPathThenTheExecutablesFolders) {
  SetPluginPath("/x/a::/x/b/:/x/a");
  std::vector<std::string> expected = {"/x/a", "/x/b"};
  for (const std::string& dir : ExecutableDirs()) expected.push_back(dir);
  EXPECT_EQ(PluginSearchPath(), expected);
}

TEST_F(BackendLoaderTest, PluginOnThePathConnectsForkedRanks) {
  SetPluginPath("/nonexistent:" + RunfilesDir());
  SHARDKIT_ASSERT_OK_AND_ASSIGN(LoadedBackend plugin, FindBackendOrPlugin("testgloo"));
  EXPECT_EQ(plugin.path, Plugin(RunfilesDir(), "testgloo"));
  EXPECT_EQ(plugin.build_id, BuildId());
  // Every rank loads the plugin by name in its own process, agrees on its build and moves data.
  SHARDKIT_EXPECT_OK(testing::RunRanks(3, "testgloo", [](int rank, Communicator& comm) {
    EXPECT_EQ(comm.total_counters().calls, 0) << "the build agreement is not counted";
    std::vector<int> value(4, rank == 1 ? 7 : -1);
    SHARDKIT_ASSERT_OK(comm.Broadcast(MutableBuffer(value), /*root=*/1));
    EXPECT_EQ(value, std::vector<int>(4, 7));
  }));
}

TEST_F(BackendLoaderTest, UnknownNameListsBuiltInsAndEveryFolder) {
  SetPluginPath("/nonexistent/a:/nonexistent/b");
  const std::vector<std::string> dirs = ExecutableDirs();
  const std::string expected = absl::StrCat(
      "backend \"nccl\" not found: built in: gloo; no libshardkit_backend_nccl.so in: "
      "/nonexistent/a, /nonexistent/b, ",
      dirs[0], ", ", dirs[1], " (set SHARDKIT_PLUGIN_PATH)");
  EXPECT_THAT(FindBackendOrPlugin("nccl"), StatusIs(absl::StatusCode::kNotFound, StrEq(expected)));
  ConnectOptions options;
  options.backend = "nccl";
  EXPECT_THAT(Connect(options), StatusIs(absl::StatusCode::kNotFound, StrEq(expected)));
  EXPECT_THAT(FindBackendOrPlugin("../gloo"),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("lowercase letters")));
}

TEST_F(BackendLoaderTest, FileThatIsNotASharedObject) {
  SetPluginPath(RunfilesDir("bad"));
  const std::string path = Plugin(RunfilesDir("bad"), "bad");
  EXPECT_THAT(FindBackendOrPlugin("bad"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       StrEq(absl::StrCat("backend \"bad\": plugin ", path, ": ", path,
                                          ": file too short"))));
}

// Loads that bring in libshardkit_plugin_test_dep.so run in a forked child: once a library of that
// name is in a process, dlopen never looks for it again.
TEST_F(BackendLoaderTest, MissingLibraryIsTheDlopenErrorVerbatim) {
  // Where its library is (the runfiles, through its rpath) it loads...
  SetPluginPath(RunfilesDir());
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [](int, const std::string&) {
    SHARDKIT_EXPECT_OK(FindBackendOrPlugin("needsdep").status());
  }));
  // ...copied alone into another folder, dlopen's own words say what is missing.
  const std::string dir =
      CopyToFreshDir(Plugin(RunfilesDir(), "needsdep"), PluginFileName("needsdep"));
  SetPluginPath(dir);
  EXPECT_THAT(FindBackendOrPlugin("needsdep"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       StrEq(absl::StrCat("backend \"needsdep\": plugin ", Plugin(dir, "needsdep"),
                                          ": libshardkit_plugin_test_dep.so: cannot open shared "
                                          "object file: No such file or directory"))));
}

TEST_F(BackendLoaderTest, AnotherAbiVersionIsRefusedNamingBoth) {
  SetPluginPath(RunfilesDir());
  EXPECT_THAT(
      FindBackendOrPlugin("abi2"),
      StatusIs(absl::StatusCode::kFailedPrecondition,
               StrEq(absl::StrCat("backend \"abi2\": plugin ", Plugin(RunfilesDir(), "abi2"),
                                  ": plugin ABI version 2, this shardkit has plugin ABI version 1 "
                                  "(rebuild the plugin with this shardkit)"))));
}

TEST_F(BackendLoaderTest, AnotherBuildIsRefusedNamingBoth) {
  SetPluginPath(RunfilesDir("other_build"));
  EXPECT_THAT(FindBackendOrPlugin("testgloo"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr(absl::StrCat(": plugin build ", kOtherBuild,
                                              ", this shardkit is build ", BuildId()))));
}

TEST_F(BackendLoaderTest, FileNamedForAnotherBackendIsRefused) {
  const std::string dir =
      CopyToFreshDir(Plugin(RunfilesDir(), "testgloo"), PluginFileName("renamed"));
  SetPluginPath(dir);
  EXPECT_THAT(FindBackendOrPlugin("renamed"),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("the plugin is backend \"testgloo\", not \"renamed\"")));
}

// Rank 0 runs this build's testgloo plugin, rank 1 one of other sources (loaded as its own host
// would: accepting its build id). Both connect, and both fail in the first collective, naming both.
TEST_F(BackendLoaderTest, RanksOfDifferentBuildsFailTogetherNamingBoth) {
  const std::string expected = absl::StrCat(
      "the ranks run different shardkit builds (every rank must use the same build of backend "
      "\"testgloo\"): rank 0: testgloo plugin, build ",
      BuildId(), "; rank 1: testgloo plugin, build ", kOtherBuild);
  SHARDKIT_EXPECT_OK(testing::ForkRanks(2, [&](int rank, const std::string& store_url) {
    const std::string path = rank == 0 ? Plugin(RunfilesDir(), "testgloo")
                                       : Plugin(RunfilesDir("other_build"), "testgloo");
    SHARDKIT_ASSERT_OK_AND_ASSIGN(
        LoadedBackend backend,
        LoadBackendPlugin(path, "testgloo", rank == 0 ? BuildId() : kOtherBuild));
    ConnectOptions options = testing::RankConnectOptions(rank, 2, "testgloo", {});
    options.store_url = store_url;
    EXPECT_THAT(internal::ConnectWithBackend(backend, options),
                StatusIs(absl::StatusCode::kFailedPrecondition, StrEq(expected)));
  }));
}

TEST_F(BackendLoaderTest, AvailableBackendsSaysWhatLoads) {
  SetPluginPath(RunfilesDir() + ":" + RunfilesDir("bad"));
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [](int, const std::string&) {
    std::vector<std::string> lines;
    for (const AvailableBackend& b : AvailableBackends()) {
      lines.push_back(absl::StrCat(b.name, " ", b.path, " ", b.loadable.ok() ? "ok" : "refused",
                                   b.description.empty() ? "" : " (" + b.description + ")"));
    }
    const std::string dir = RunfilesDir();
    EXPECT_THAT(lines, ::testing::ElementsAre(
                           "gloo  ok", "abi2 " + Plugin(dir, "abi2") + " refused",
                           "needsdep " + Plugin(dir, "needsdep") + " ok",
                           "oldabi " + Plugin(dir, "oldabi") + " ok",
                           "testgloo " + Plugin(dir, "testgloo") + " ok (transports: tcp)",
                           "bad " + Plugin(RunfilesDir("bad"), "bad") + " refused"));
  }));
}

TEST_F(BackendLoaderTest, PluginOfTheVersionOneStructLoadsAndConnects) {
  SetPluginPath(RunfilesDir());
  SHARDKIT_EXPECT_OK(testing::RunRanks(2, "oldabi", [](int rank, Communicator& comm) {
    std::vector<int> v(4, rank);
    SHARDKIT_ASSERT_OK(comm.Broadcast(MutableBuffer(v), 0));
    EXPECT_EQ(v[3], 0);
  }));
}

TEST_F(BackendLoaderTest, PluginThatCannotBeUsedHereSaysWhy) {
  SetPluginPath(RunfilesDir());
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [](int, const std::string&) {
    setenv("SHARDKIT_TESTGLOO_UNUSABLE", "1", 1);
    for (const AvailableBackend& b : AvailableBackends()) {
      if (b.name != "testgloo") continue;
      SHARDKIT_EXPECT_OK(b.loadable);
      EXPECT_THAT(b.usable, StatusIs(absl::StatusCode::kFailedPrecondition,
                                     StrEq("SHARDKIT_TESTGLOO_UNUSABLE is set")));
      EXPECT_EQ(b.description, "");
    }
  }));
}

// The plugin's own copy of core sees the host's allocator blocks: the loader bound it to them.
TEST_F(BackendLoaderTest, PluginFindsTheHostsAllocatorBlocks) {
  SetPluginPath(RunfilesDir());
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [](int, const std::string&) {
    absl::StatusOr<std::shared_ptr<Storage>> block = Storage::Allocate(Device::Cpu(), 4 << 20);
    SHARDKIT_ASSERT_OK(block);
    std::vector<char> other(4 << 20);
    auto described = [](const void* at) {
      setenv("SHARDKIT_TESTGLOO_PROBE", absl::StrCat(absl::Hex(at)).c_str(), 1);
      for (const AvailableBackend& b : AvailableBackends()) {
        if (b.name == "testgloo") return b.description;
      }
      return std::string("testgloo not found");
    };
    const void* inside = (*block)->data() + 12345;
    char expected[64];
    std::snprintf(expected, sizeof(expected), "host block %p of %d bytes",
                  static_cast<void*>((*block)->data()), 4 << 20);
    EXPECT_EQ(described(inside), expected);
    EXPECT_EQ(described(other.data()), "no host block");
  }));
}

// A directory a program adds (the Python package adds the wheel's) comes after the others and is
// searched: a name found nowhere lists it. In a forked child: the directory stays for the rest of
// the process.
TEST_F(BackendLoaderTest, AddedDirectoriesComeLastAndAreSearched) {
  SetPluginPath("/nonexistent");
  const std::string added = testing::FreshTestDir("added");
  SHARDKIT_EXPECT_OK(testing::ForkRanks(1, [&](int, const std::string&) {
    AddPluginDirectory(added);
    std::vector<std::string> expected = {"/nonexistent"};
    for (const std::string& dir : ExecutableDirs()) expected.push_back(dir);
    expected.push_back(added);
    EXPECT_EQ(PluginSearchPath(), expected);
    absl::StatusOr<LoadedBackend> plugin = FindBackendOrPlugin("nccl");
    EXPECT_EQ(plugin.status().code(), absl::StatusCode::kNotFound);
    EXPECT_THAT(std::string(plugin.status().message()), ::testing::HasSubstr(", " + added + " ("));
  }));
}

}  // namespace
}  // namespace shardkit
