// The Hugging Face multi-file layout that `shardkit gather --max-shard-size SIZE` writes
// (GatherHuggingFace, gather_checkpoint.h) and `shard --checkpoint` reads back
// (checkpoint_source.h):
//
//   OUT_DIR/model-00001-of-00003.safetensors ... one file per group of tensors
//   OUT_DIR/model.safetensors.index.json         {"metadata": {"total_size": N},
//                                                 "weight_map": {"tensor": "model-…"}}, last
//   OUT_DIR/model.safetensors                    instead of both, when one file holds everything
//
// Which tensor goes to which file is Hugging Face's rule (huggingface_hub's
// split_state_dict_into_shards_factory), applied to the tensors in name order (Hugging Face
// applies it in the model's state-dict order, which a checkpoint does not record):
//
//   FileAssignment files = AssignFiles({400, 700, 100}, 500);   // file_of {0, 1, 0}, 2 files
//   std::vector<std::string> names = HfFileNames(files.files);  // model-00001-of-00002…
#ifndef SHARDKIT_INTEGRATION_FORMATS_HF_HF_OUTPUT_H_
#define SHARDKIT_INTEGRATION_FORMATS_HF_HF_OUTPUT_H_

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/os/dir_lock.h"
#include "core/os/files.h"

namespace shardkit::hf {

inline constexpr char kHfSingleFileName[] = "model.safetensors";
inline constexpr char kHfIndexFileName[] = "model.safetensors.index.json";

struct FileAssignment {
  std::vector<size_t> file_of;  // per tensor, its file: 0 .. files - 1
  size_t files = 0;
};

// Hugging Face's fill rule over tensors of `tensor_bytes` each (data bytes only; headers are not
// counted), in the order given: a tensor larger than `max_file_bytes` gets a file of its own and
// the current file stays open for the next tensors; otherwise a tensor that does not fit in the
// current file's remaining room closes it and starts the next (a file may be exactly full).
// Files are numbered in the order they are started — so a file of its own started while another
// was open comes after it, where huggingface_hub numbers it first (the groups are the same).
// Zero tensors make zero files. Precondition: max_file_bytes > 0, every size >= 0.
FileAssignment AssignFiles(const std::vector<int64_t>& tensor_bytes, int64_t max_file_bytes);

// The file names of a checkpoint of `files` files: {"model.safetensors"} for 0 or 1, else
// "model-%05d-of-%05d.safetensors" for 1 .. files.
std::vector<std::string> HfFileNames(size_t files);

// Whether `name` is one file of a multi-file checkpoint by its name alone:
// PREFIX-K-of-N.safetensors with K and N decimal and N > 1 (sets `*files` to N).
bool IsNumberedPartName(std::string_view name, int64_t* files);

// model.safetensors.index.json's text: {"metadata": {"total_size": total_size}, "weight_map":
// weight_map}, keys sorted, indented by 2 and ending in a newline, as transformers'
// save_pretrained formats it (whose metadata also holds "total_parameters", the model's
// parameter count, which a checkpoint's tensors do not give; huggingface_hub's
// save_torch_state_dict writes total_size alone).
std::string HfIndexJson(int64_t total_size, const std::map<std::string, std::string>& weight_map);

// Whether `name` is one a Hugging Face output of GatherHuggingFace may hold: model.safetensors,
// model.safetensors.index.json, model-K-of-N.safetensors.
bool IsHfOutputName(std::string_view name);

// Whether `name` is a file a model folder holds beside its weights, which a Hugging Face output
// leaves alone: config.json, generation_config.json, the tokenizer's and processor's files
// (tokenizer.json, tokenizer_config.json, tokenizer.model, special_tokens_map.json,
// added_tokens.json, vocab.json, vocab.txt, merges.txt, chat_template.json/.jinja,
// preprocessor_config.json, processor_config.json), README.md, and a model's own code
// (configuration_*.py, modeling_*.py, tokenization_*.py).
bool IsModelFolderFile(std::string_view name);

// Makes `dir` ready for a new Hugging Face checkpoint: creates it (and its parents) if missing,
// recording in `*created` (if given) which; it must then hold no weights — `.shardkit.lock` (a
// leftover, or another run's) and a model folder's other files (IsModelFolderFile, left alone)
// aside — both before the lock is taken (so a refused directory gets no lock
// file) and after (another run may have written meanwhile). Temporary files of such an output whose
// process is gone from this host are not refused: they are removed under the lock
// (os::RemoveDeadTemporaries); a running process's are refused, never touched. Errors:
// kInvalidArgument naming `dir` and what it holds (the first names, or a running process's
// temporary file), or the OS error; as os::DirectoryLock::Acquire when another run holds the lock.
// Destroying the returned lock removes the lock file.
[[nodiscard]] absl::StatusOr<os::DirectoryLock> LockEmptyDirectory(
    const std::string& dir, os::CreatedDirectories* created = nullptr);

}  // namespace shardkit::hf

#endif  // SHARDKIT_INTEGRATION_FORMATS_HF_HF_OUTPUT_H_
