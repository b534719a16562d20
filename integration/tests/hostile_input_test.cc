// Feeds every file of the hostile input corpus (testing/corpus, see generate.py there) to the
// parser it targets and checks that each is rejected cleanly: a kInvalidArgument status (no crash,
// no exception, no abort), within a CPU-time bound and a peak-memory bound proportional to the
// file's size (so that no lying number — a header length, a world size, a shape — makes the
// parser allocate what the input does not hold).
//
//   spec/         ParseSpecOrPlan, then layout on shape [8, 4] for a world of 4 (plans: Resolve
//                 for a parameter "a.b.weight")
//   safetensors/  safetensors::Reader::Open, then ReadTensor for every tensor
//   index/        checkpoint::ParseIndex
//   dcp/          directories: checkpoint::DcpSource::Open, then every tensor read whole
//                 (testing/corpus/generate_dcp.py)
//   valid/        one accepted input per parser: the corpus is rejected for its defects only
//
// Under ASan/TSan the memory bound is not checked (shadow memory and quarantine dominate the
// resident set) and the time bound is ten times looser.
#include <time.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "core/base/status_macros.h"
#include "core/os/proc_status.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/checkpoint_source.h"
#include "integration/checkpoint/source/dcp_source.h"
#include "integration/formats/safetensors/safetensors.h"
#include "specs/parameter_layout.h"
#include "specs/plan.h"
#include "testing/sanitizers.h"
#include "testing/status_matchers.h"

namespace shardkit {
namespace {

namespace fs = std::filesystem;

using ::shardkit::testing::kSanitized;

constexpr double kMaxCpuSeconds = kSanitized ? 20.0 : 2.0;
// Peak resident growth allowed while handling one file: a fixed allowance plus a multiple of the
// file's size (a parsed JSON DOM takes a few dozen bytes per input byte at worst).
constexpr int64_t kBaseAllowanceBytes = int64_t{64} << 20;
constexpr int64_t kBytesPerInputByte = 40;

fs::path CorpusDir() {
  const char* srcdir = std::getenv("TEST_SRCDIR");
  return fs::path(srcdir == nullptr ? "." : srcdir) / "shardkit" / "testing" / "corpus";
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

double CpuSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

absl::Status CheckSpecOrPlan(const fs::path& path) {
  const std::string text = ReadFile(path);
  absl::StatusOr<specs::SpecOrPlan> parsed = specs::ParseSpecOrPlan(text);
  if (!parsed.ok()) return parsed.status();
  if (const auto* plan = std::get_if<specs::Plan>(&*parsed)) {
    return specs::Resolve(*plan, {{"a.b.weight", {8, 4}}}, /*world_size=*/4).status();
  }
  return specs::LayOutParameter(std::get<specs::ShardingSpec>(*parsed), {8, 4}, /*world_size=*/4)
      .status();
}

absl::Status CheckSafetensors(const fs::path& path) {
  absl::StatusOr<safetensors::Reader> reader = safetensors::Reader::Open(path.string());
  if (!reader.ok()) return reader.status();
  for (const safetensors::TensorInfo& info : reader->header().tensors) {
    if (absl::StatusOr<Tensor> t = reader->ReadTensor(info.name); !t.ok()) return t.status();
  }
  return absl::OkStatus();
}

absl::Status CheckIndex(const fs::path& path) {
  return checkpoint::ParseIndex(ReadFile(path), path.string()).status();
}

absl::Status CheckHfIndex(const fs::path& path) {
  std::vector<std::string> warnings;
  return checkpoint::CheckpointSource::Open({checkpoint::CheckpointKind::kIndex, path.string()},
                                            &warnings)
      .status();
}

absl::Status CheckDcp(const fs::path& dir) {
  absl::StatusOr<std::unique_ptr<checkpoint::DcpSource>> source =
      checkpoint::DcpSource::Open(dir.string(), int64_t{64} << 10);
  if (!source.ok()) return source.status();
  for (size_t t = 0; t < (*source)->header().tensors.size(); ++t) {
    const safetensors::TensorInfo& info = (*source)->header().tensors[t];
    std::vector<std::byte> bytes(info.end - info.begin);
    SHARDKIT_RETURN_IF_ERROR(
        (*source)->ReadBytes(t, 0, static_cast<int64_t>(bytes.size()), bytes.data()));
  }
  return absl::OkStatus();
}

absl::Status CheckFile(const fs::path& path) {
  const std::string kind = path.parent_path().filename().string();
  if (kind == "dcp") return CheckDcp(path);
  if (kind == "spec") return CheckSpecOrPlan(path);
  if (kind == "safetensors") return CheckSafetensors(path);
  if (kind == "index") return CheckIndex(path);
  if (kind == "hf_index") return CheckHfIndex(path);
  if (kind == "valid") {
    if (absl::EndsWith(path.string(), ".index.json")) return CheckHfIndex(path);
    if (path.extension() == ".safetensors") return CheckSafetensors(path);
    if (path.filename() == "index.json") return CheckIndex(path);
    return CheckSpecOrPlan(path);
  }
  return absl::InternalError(absl::StrCat("no parser for ", path.string()));
}

struct Measured {
  absl::Status status;
  double cpu_seconds = 0;
  int64_t peak_growth = -1;  // bytes; -1 when not measured
};

Measured Measure(const fs::path& path) {
  const bool peak_known = os::ResetPeakRss().ok();
  const absl::StatusOr<int64_t> rss_before = os::ProcStatusBytes("VmRSS");
  const double start = CpuSeconds();
  Measured m;
  m.status = CheckFile(path);
  m.cpu_seconds = CpuSeconds() - start;
  const absl::StatusOr<int64_t> peak = os::ProcStatusBytes("VmHWM");
  if (peak_known && rss_before.ok() && peak.ok()) m.peak_growth = *peak - *rss_before;
  return m;
}

std::vector<fs::path> CorpusFiles(const std::string& kind) {
  std::vector<fs::path> out;
  for (const fs::path& root : {CorpusDir() / kind, CorpusDir() / "large" / kind}) {
    if (!fs::exists(root)) continue;
    for (const fs::directory_entry& entry : fs::directory_iterator(root)) {
      out.push_back(entry.path());
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A file's bytes, or a directory's (a DCP checkpoint's files).
int64_t InputBytes(const fs::path& path) {
  if (!fs::is_directory(path)) return static_cast<int64_t>(fs::file_size(path));
  int64_t total = 0;
  for (const fs::directory_entry& entry : fs::directory_iterator(path)) {
    total += static_cast<int64_t>(entry.file_size());
  }
  return total;
}

void ExpectBounded(const fs::path& path, const Measured& m) {
  EXPECT_LT(m.cpu_seconds, kMaxCpuSeconds) << path;
  if (kSanitized || m.peak_growth < 0) return;
  const int64_t size = InputBytes(path);
  EXPECT_LT(m.peak_growth, kBaseAllowanceBytes + kBytesPerInputByte * size)
      << path << " (" << size << " bytes)";
}

void Report(const fs::path& path, const Measured& m) {
  std::string message(m.status.message());
  if (const size_t at = message.find(path.string()); at != std::string::npos) {
    message.erase(at, path.string().size() + 2);  // the "<path>: " prefix
  }
  std::printf("%-52s %9ju B %7.3f s cpu %8.1f MiB peak  %s\n", path.filename().string().c_str(),
              static_cast<uintmax_t>(InputBytes(path)), m.cpu_seconds,
              static_cast<double>(m.peak_growth) / (1 << 20), message.substr(0, 100).c_str());
  std::fflush(stdout);
}

class HostileInputTest : public ::testing::TestWithParam<std::string> {};

TEST_P(HostileInputTest, EveryFileIsRejectedCleanly) {
  const std::vector<fs::path> files = CorpusFiles(GetParam());
  ASSERT_GE(files.size(), 10u) << "corpus missing under " << CorpusDir();
  for (const fs::path& path : files) {
    std::printf("-> %s\n", path.filename().string().c_str());  // names the file if it crashes
    std::fflush(stdout);
    const Measured m = Measure(path);
    Report(path, m);
    EXPECT_THAT(m.status, testing::StatusIs(absl::StatusCode::kInvalidArgument, ::testing::_))
        << path;
    ExpectBounded(path, m);
  }
}

INSTANTIATE_TEST_SUITE_P(Corpus, HostileInputTest,
                         ::testing::Values("spec", "safetensors", "index", "hf_index", "dcp"));

TEST(HostileInputTest, ValidControlsAreAccepted) {
  const std::vector<fs::path> files = CorpusFiles("valid");
  ASSERT_EQ(files.size(), 5u);
  for (const fs::path& path : files) EXPECT_THAT(CheckFile(path), testing::IsOk()) << path;
}

TEST(HostileInputTest, CorpusHasAtLeastOneHundredFiles) {
  size_t total = 0;
  for (const char* kind : {"spec", "safetensors", "index", "hf_index"}) {
    total += CorpusFiles(kind).size();
  }
  EXPECT_GE(total, 100u);
}

}  // namespace
}  // namespace shardkit
