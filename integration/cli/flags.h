// The flags several `shardkit` subcommands share (memory, FP8 blocks, plan strictness, selection,
// output format, ranks). The parser itself, and what programs outside the CLI use of it, is
// integration/flags/flags.h; its names are also spelled cli:: here, as the commands always did.
#ifndef SHARDKIT_INTEGRATION_CLI_FLAGS_H_
#define SHARDKIT_INTEGRATION_CLI_FLAGS_H_

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "integration/checkpoint/output_format.h"
#include "integration/checkpoint/shard_index.h"
#include "integration/checkpoint/source/selected_source.h"
#include "integration/checkpoint/stream/memory_budget.h"
#include "integration/flags/flags.h"

namespace shardkit::cli {

using flags::ExitCodeFor;
using flags::FlagParser;
using flags::ForFlag;
using flags::kHelpWidth;
using flags::kSeeHelp;
using flags::ParseByteSize;
using flags::ParseCommand;
using flags::ParseResult;
using flags::Positionals;
using flags::ReportError;
using flags::Require;

// --memory-mib M of the commands that stream checkpoints (shard, gather): at most M MiB of tensor
// data in memory on any rank at once; at least 1.
inline constexpr int64_t kDefaultMemoryMib = checkpoint::kDefaultMemoryBytes >> 20;
void AddMemoryFlag(FlagParser& flags, int64_t* mib);

// --fp8-block B (>= 1) and --allow-misaligned-scales of the commands that check FP8 weights'
// block scales (shard; reshard): `*block` holds the default when this is called.
void AddFp8Flags(FlagParser& flags, int64_t* block, bool* allow_misaligned);

// --strict and --allow-replicated-only of the commands that bind a plan to a checkpoint (shard,
// reshard, spec check --checkpoint): plan rules that take no parameter are errors; a plan that
// shards nothing is accepted.
void AddStrictFlag(FlagParser& flags, bool* strict, bool* allow_replicated_only);

// --include GLOB and --exclude GLOB (repeatable), --strict for their warnings and, with
// `strip_prefix`, --strip-prefix PREFIX: which tensors a command reads from its input and under
// which names (gather; reshard without --strip-prefix, its --strict being AddStrictFlag's, which
// the caller copies into select->strict).
void AddSelectionFlags(FlagParser& flags, checkpoint::TensorSelection* select, bool strip_prefix);

// --format shardkit|dcp of the commands that write checkpoints (shard, reshard, gather): a shardkit
// shard directory (or safetensors file) or a PyTorch DCP checkpoint directory. `what` ends the
// help ("the output: ..."). ParseFormatFlag: kInvalidArgument "--format: expected shardkit or
// dcp, got X".
void AddFormatFlag(FlagParser& flags, std::string* format, std::string_view help);
[[nodiscard]] absl::StatusOr<checkpoint::OutputFormat> ParseFormatFlag(const std::string& text);

// How the help of --backend and --timeout ends where the environment gives the default:
// "(default: $SHARDKIT_BACKEND, else gloo)", "(default: $SHARDKIT_TIMEOUT, else 60)".
std::string BackendDefaultHelp();
std::string TimeoutDefaultHelp();

// --nproc N, --backend B and --timeout S: the flags of every command that runs ranks (launch,
// shard, reshard, demo, bench), declared by AddRankFlags and checked by CheckRankFlags here
// only. What the commands differ in, each documented in docs/cli.md, is their RankFlagsUse.
enum class RankFlag { kNproc, kBackend, kTimeout };
inline constexpr int64_t kMaxNproc = 1 << 16;

struct RankFlagsUse {
  // --nproc's help; " (required)" or " (default N)" is appended when one of these says so.
  const char* nproc_help = "";
  bool nproc_required = false;
  int64_t nproc_default = 0;  // 0: none (the help says what happens without it)
  int64_t nproc_max = kMaxNproc;
  // What --backend and --timeout are for; BackendDefaultHelp() / TimeoutDefaultHelp() follow.
  const char* backend_help = "communication backend";
  const char* timeout_help = "per-operation deadline in seconds";
};

// The three flags' values; which were given is known after CheckRankFlags.
struct RankFlags {
  explicit RankFlags(const RankFlagsUse& use) : use(use), nproc(use.nproc_default) {}

  RankFlagsUse use;
  int64_t nproc;  // --nproc N, else use.nproc_default
  std::string backend;
  double timeout_s = 0;
  bool nproc_set = false, backend_set = false, timeout_set = false;
};

// Declares the flags in `which`, in that order (a command whose help lists flags of its own
// between them declares them in two calls): --nproc an integer in [1, use.nproc_max].
void AddRankFlags(FlagParser& flags, RankFlags* out,
                  std::initializer_list<RankFlag> which = {RankFlag::kNproc, RankFlag::kBackend,
                                                           RankFlag::kTimeout});

// Records which of the flags were given. Errors: kInvalidArgument "--nproc is required" (when
// out->use.nproc_required), "--timeout must be > 0 seconds, got 0".
[[nodiscard]] absl::Status CheckRankFlags(const FlagParser& flags, RankFlags* out);

// Whether long phases print progress lines on stderr: SHARDKIT_PROGRESS=1 (or 0) decides, else
// whether stderr is a terminal.
bool ProgressWanted();

}  // namespace shardkit::cli

#endif  // SHARDKIT_INTEGRATION_CLI_FLAGS_H_
