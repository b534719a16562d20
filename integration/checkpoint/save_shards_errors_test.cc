// SaveShards' and LoadShards' errors over real Gloo across forked ranks, with real files: module
// vs. directory mismatches, disagreeing ranks, a missing directory, foreign files, a held lock, a
// rank failing before the commit — the same error on every rank, nothing changed.
#include <signal.h>
#include <sys/resource.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "core/comm/collective_status.h"
#include "core/os/dir_lock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "integration/checkpoint/save_shards.h"
#include "integration/checkpoint/save_shards_fixture.h"
#include "integration/checkpoint/shard_index.h"
#include "testing/rank_group.h"
#include "testing/status_matchers.h"
#include "testing/test_dir.h"

namespace shardkit::checkpoint {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;
using save_fixture::ExpectLoaded;
using save_fixture::Full;
using save_fixture::kParams;
using save_fixture::LoadPlan;
using save_fixture::MetaModule;
using save_fixture::SameBytes;
using save_fixture::SavePlan;
using save_fixture::ShardedModule;

// Every slot still holds its meta tensor: a failed load changed nothing.
void ExpectUnchanged(const Module& module) {
  for (const std::string& name : module.names()) {
    ASSERT_FALSE(*module.IsSharded(name)) << name;
    EXPECT_TRUE((*module.GetTensor(name))->is_meta()) << name;
  }
}

// A module or directory that does not match: the same error on every rank, nothing changed.
void LoadErrorsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string dir(arg);
  const specs::Plan plan = LoadPlan(comm.world_size());
  const auto expect_error = [&](Module& module, absl::StatusCode code, const std::string& text,
                                const std::string& dir_to_load) {
    EXPECT_THAT(LoadShards(dir_to_load, module, plan, comm),
                testing::StatusIs(code, HasSubstr(text)));
    ExpectUnchanged(module);
  };
  Module shape = MetaModule();
  ASSERT_THAT(shape.SetTensor("embed.weight", *Tensor::Meta({10, 7}, DType::kFloat32)),
              testing::IsOk());
  expect_error(shape, absl::StatusCode::kInvalidArgument,
               "\"embed.weight\" is F32[10, 7] in the module but F32[10, 6] in index.json", dir);
  Module dtype = MetaModule();
  ASSERT_THAT(dtype.SetTensor("layers.0.proj.weight", *Tensor::Meta({7, 5}, DType::kFloat32)),
              testing::IsOk());
  expect_error(dtype, absl::StatusCode::kInvalidArgument,
               "\"layers.0.proj.weight\" is F32[7, 5] in the module but I32[7, 5]", dir);
  Module extra = MetaModule();
  ASSERT_THAT(extra.AddParameter("extra.bias", *Tensor::Meta({3}, DType::kFloat32)),
              testing::IsOk());
  expect_error(extra, absl::StatusCode::kInvalidArgument,
               "\"extra.bias\" of the module is not in index.json", dir);
  Module fewer;
  for (size_t i = 0; i + 1 < std::size(kParams); ++i) {
    ASSERT_THAT(
        fewer.AddParameter(kParams[i].name, *Tensor::Meta(kParams[i].shape, kParams[i].dtype)),
        testing::IsOk());
  }
  expect_error(fewer, absl::StatusCode::kInvalidArgument,
               "\"cols.view\" of index.json is not in the module", dir);
  Module missing = MetaModule();
  expect_error(missing, absl::StatusCode::kNotFound, "-nonexistent: no such directory",
               dir + "-nonexistent");
  // One rank's module differs from the directory: every rank fails, naming that rank.
  Module one_off = MetaModule();
  if (rank == 1) {
    ASSERT_THAT(one_off.SetTensor("norm.weight", *Tensor::Meta({5}, DType::kFloat32)),
                testing::IsOk());
  }
  expect_error(one_off, absl::StatusCode::kInvalidArgument, "rank 1: parameter \"norm.weight\"",
               dir);
  Module budget = MetaModule();
  EXPECT_THAT(LoadShards(dir, budget, plan, comm, {.memory_bytes = -1}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("memory_bytes must be > 0, got -1")));
  ExpectUnchanged(budget);
  // A rank file cut short (in a copy): every rank fails opening it, nothing changes.
  const std::string cut = dir + "-cut";
  if (rank == 0) {
    fs::copy(dir, cut, fs::copy_options::recursive);
    const fs::path file = fs::path(cut) / RankFileName(1);
    fs::resize_file(file, fs::file_size(file) - 2);
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "setup"), testing::IsOk());
  Module truncated = MetaModule();
  EXPECT_THAT(LoadShards(cut, truncated, plan, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(RankFileName(1))));
  ExpectUnchanged(truncated);
  // allow_unused skips what the module does not hold.
  ASSERT_THAT(LoadShards(dir, fewer, plan, comm, {.allow_unused = true}), testing::IsOk());
  EXPECT_TRUE(*fewer.IsSharded("embed.weight"));
}

// SaveShards with `limited_rank`'s files limited to 16 bytes (RLIMIT_FSIZE; SIGXFSZ ignored, so
// that the write fails with EFBIG instead of killing the rank), restored afterwards.
absl::Status SaveWithSmallFileLimit(const std::string& dir, const Module& module,
                                    Communicator& comm, int limited_rank) {
  struct rlimit before {};
  ::getrlimit(RLIMIT_FSIZE, &before);
  void (*handler)(int) = SIG_DFL;
  if (comm.rank() == limited_rank) {
    handler = ::signal(SIGXFSZ, SIG_IGN);
    struct rlimit small = before;
    small.rlim_cur = 16;
    ::setrlimit(RLIMIT_FSIZE, &small);
  }
  const absl::Status status = SaveShards(dir, module, comm);
  if (comm.rank() == limited_rank) {
    ::setrlimit(RLIMIT_FSIZE, &before);
    ::signal(SIGXFSZ, handler);
  }
  return status;
}

bool NoIndex(const std::string& dir) { return !fs::exists(fs::path(dir) / kIndexFileName); }

// SaveShards' refusals: disagreeing ranks, a slot without data, foreign files, a held lock — the
// same error everywhere and no index.json.
void SaveRefusalsCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string base(arg);
  Module module = ShardedModule(comm);
  Module disagree = ShardedModule(comm);
  if (rank == 1) {
    ASSERT_THAT(disagree.SetTensor("norm.weight", *Tensor::Arange({5}, DType::kFloat32)),
                testing::IsOk());
  }
  EXPECT_THAT(SaveShards(base + "/disagree", disagree, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                ::testing::AllOf(HasSubstr("rank 1"), HasSubstr("norm.weight"))));
  EXPECT_TRUE(NoIndex(base + "/disagree"));
  EXPECT_THAT(SaveShards(base + "/budget", module, comm, {.memory_bytes = 0}),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("memory_bytes must be > 0, got 0")));
  Module meta = MetaModule();
  EXPECT_THAT(SaveShards(base + "/meta", meta, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument,
                                HasSubstr("parameter \"embed.weight\" has no data")));
  const std::string foreign = base + "/foreign";
  if (rank == 0) {
    fs::create_directories(foreign);
    std::ofstream(fs::path(foreign) / "notes.txt") << "mine\n";
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "setup"), testing::IsOk());
  EXPECT_THAT(SaveShards(foreign, module, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("notes.txt")));
  EXPECT_TRUE(NoIndex(foreign));
  // Another writer holds the directory's lock: every rank fails, naming it.
  const std::string locked = base + "/locked";
  std::optional<os::DirectoryLock> lock;
  if (rank == 0) {
    fs::create_directories(locked);
    SHARDKIT_ASSERT_OK_AND_ASSIGN(lock, os::DirectoryLock::Acquire(locked));
  }
  ASSERT_THAT(AgreeOnStatus(comm, absl::OkStatus(), "setup"), testing::IsOk());
  EXPECT_THAT(SaveShards(locked, module, comm),
              testing::StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr(os::kLockFileName)));
  EXPECT_TRUE(NoIndex(locked));
}

// A saved directory, then a save that rank 1 cannot write (its files may not grow beyond 16
// bytes: EFBIG, a real write failure): every rank fails naming rank 1 and its file, and the
// earlier output is still there, complete — it loads — with nothing left beside it.
void SaveFailsLateCase(int rank, Communicator& comm, std::string_view arg) {
  const std::string base(arg);
  Module module = ShardedModule(comm);
  const std::string dir = base + "/late";
  ASSERT_THAT(SaveShards(dir, module, comm), testing::IsOk());
  EXPECT_FALSE(NoIndex(dir));
  const absl::Status late = SaveWithSmallFileLimit(dir, module, comm, /*limited_rank=*/1);
  EXPECT_THAT(late, testing::StatusIs(
                        absl::StatusCode::kUnavailable,
                        ::testing::AllOf(HasSubstr("shard files: rank 1"),
                                         HasSubstr(RankFileName(1)), HasSubstr("File too large"))));
  EXPECT_FALSE(NoIndex(dir));
  Module loaded = MetaModule();
  ASSERT_THAT(LoadShards(dir, loaded, SavePlan(), comm), testing::IsOk());
  ExpectLoaded(loaded, rank);
  std::vector<std::string> beside;
  for (const auto& entry : fs::directory_iterator(base)) {
    beside.push_back(entry.path().filename().string());
  }
  EXPECT_THAT(beside, ::testing::Not(::testing::Contains(HasSubstr("shardkit-new"))));
  ASSERT_THAT(SaveShards(dir, module, comm), testing::IsOk());  // replaces the earlier output
  EXPECT_FALSE(NoIndex(dir));
}

TEST(SaveShards, Errors) {
  const std::string dir = testing::TestPath("errors");
  SHARDKIT_ASSERT_OK_AND_ASSIGN(testing::RankGroup * group, testing::RankGroup::Shared(3, "gloo"));
  ASSERT_THAT(group->Run(&SaveRefusalsCase, dir), testing::IsOk());
  ASSERT_THAT(group->Run(&SaveFailsLateCase, dir), testing::IsOk());
  EXPECT_THAT(group->Run(&LoadErrorsCase, dir + "/late"), testing::IsOk());
}

}  // namespace
}  // namespace shardkit::checkpoint
