#include "integration/formats/dcp/metadata.h"

#include <algorithm>
#include <filesystem>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "core/os/files.h"
#include "integration/formats/dcp/internal/metadata_pickle.h"
#include "integration/formats/pickle/pickle_reader.h"
#include "specs/fingerprint.h"
#include "specs/shard_metadata.h"

namespace shardkit::dcp {

using ::shardkit::pickle::kMaxPickleBytes;
using ::shardkit::pickle::Pickle;
namespace {

namespace fs = std::filesystem;

absl::Status Invalid(const std::string& message) { return absl::InvalidArgumentError(message); }

std::string ChunkText(const TensorEntry& tensor, size_t c) {
  const Chunk& chunk = tensor.chunks[c];
  return absl::StrCat("tensor ", QuoteName(tensor.fqn), " chunk ", c, " (offsets ",
                      ShapeToString(chunk.offsets), ", sizes ", ShapeToString(chunk.sizes), ")");
}

std::string ItemText(const StorageItem& item) {
  return absl::StrCat(QuoteName(item.file), " bytes [", item.offset, ", ",
                      item.offset + item.length, ")");
}

// Every chunk inside the tensor, no two overlapping (specs::FindOverlap's sweep, not a pass over
// every pair), and, if `require_cover`, their volumes adding up to the tensor's.
absl::Status CheckChunks(const TensorEntry& tensor, bool require_cover) {
  SHARDKIT_RETURN_IF_ERROR(ComputeShapeSize(tensor.shape, tensor.dtype).status());
  std::vector<specs::ShardMetadata> boxes;
  boxes.reserve(tensor.chunks.size());
  for (size_t c = 0; c < tensor.chunks.size(); ++c) {
    const Chunk& chunk = tensor.chunks[c];
    if (chunk.offsets.size() != tensor.shape.size() || chunk.sizes.size() != tensor.shape.size()) {
      return Invalid(absl::StrCat(ChunkText(tensor, c), " does not have the ", tensor.shape.size(),
                                  " dimensions of shape ", ShapeToString(tensor.shape)));
    }
    for (size_t d = 0; d < tensor.shape.size(); ++d) {
      if (chunk.offsets[d] > tensor.shape[d] ||
          chunk.sizes[d] > tensor.shape[d] - chunk.offsets[d]) {
        return Invalid(absl::StrCat(ChunkText(tensor, c), " lies outside shape ",
                                    ShapeToString(tensor.shape), " in dimension ", d));
      }
    }
    boxes.push_back({chunk.offsets, chunk.sizes});
  }
  if (std::optional<std::pair<size_t, size_t>> pair = specs::FindOverlap(boxes)) {
    return Invalid(absl::StrCat(ChunkText(tensor, pair->first), " and chunk ", pair->second,
                                " (offsets ", ShapeToString(tensor.chunks[pair->second].offsets),
                                ", sizes ", ShapeToString(tensor.chunks[pair->second].sizes),
                                ") overlap"));
  }
  if (!require_cover) return absl::OkStatus();
  // Inside the tensor and disjoint: the sum cannot pass the tensor's element count.
  int64_t covered = 0;
  for (const Chunk& chunk : tensor.chunks) {
    int64_t volume = 1;
    for (int64_t size : chunk.sizes) volume *= size;
    covered += volume;
  }
  int64_t numel = 1;
  for (int64_t size : tensor.shape) numel *= size;
  if (covered != numel) {
    return Invalid(absl::StrCat("tensor ", QuoteName(tensor.fqn), ": its ", tensor.chunks.size(),
                                " chunks cover ", covered, " of the ", numel, " elements of shape ",
                                ShapeToString(tensor.shape)));
  }
  return absl::OkStatus();
}

absl::Status CheckFileName(const StorageItem& item, absl::FunctionRef<std::string()> owner) {
  const std::string& name = item.file;
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos) {
    return Invalid(absl::StrCat(owner(), ": item file ", QuoteName(name),
                                " is not a plain file name in the checkpoint directory"));
  }
  if (item.length > UINT64_MAX - item.offset) {
    return Invalid(absl::StrCat(owner(), ": item offset ", item.offset, " + length ", item.length,
                                " overflows"));
  }
  return absl::OkStatus();
}

constexpr char kSafetensorsWriter[] =
    "FileSystemWriter(serialization_format=SAFETENSORS) output, which shardkit cannot read by "
    "range (torch cannot dcp.load it either); save with the default TORCH_SAVE format";

// Items: plain file names; a tensor item holds a torch.save archive, which is always longer than
// the chunk's raw bytes; no two items share bytes of a file.
absl::Status CheckItems(const Metadata& metadata) {
  // An item and whose it is: a tensor's chunk, or a bytes item (chunk unused). Named only for
  // messages.
  struct Span {
    const StorageItem* item;
    const std::string* fqn;
    const TensorEntry* tensor;  // null for a bytes item
    size_t chunk;
  };
  auto owner = [](const Span& span) {
    return span.tensor != nullptr ? ChunkText(*span.tensor, span.chunk)
                                  : absl::StrCat("bytes item ", QuoteName(*span.fqn));
  };
  std::vector<Span> spans;
  for (const TensorEntry& tensor : metadata.tensors) {
    const auto element = static_cast<uint64_t>(ElementSize(tensor.dtype));
    for (size_t c = 0; c < tensor.chunks.size(); ++c) {
      const Chunk& chunk = tensor.chunks[c];
      const Span span{&chunk.item, &tensor.fqn, &tensor, c};
      SHARDKIT_RETURN_IF_ERROR(CheckFileName(chunk.item, [&] { return owner(span); }));
      uint64_t raw = element;
      for (int64_t size : chunk.sizes) raw *= static_cast<uint64_t>(size);  // fits: shape checked
      if (chunk.item.length <= raw) {
        return Invalid(absl::StrCat(
            owner(span), ": its item (", ItemText(chunk.item), ") is no longer than the chunk's ",
            raw, " bytes of values, so it holds no torch.save archive: ", kSafetensorsWriter));
      }
      spans.push_back(span);
    }
  }
  for (const BytesEntry& bytes : metadata.bytes) {
    const Span span{&bytes.item, &bytes.fqn, nullptr, 0};
    SHARDKIT_RETURN_IF_ERROR(CheckFileName(bytes.item, [&] { return owner(span); }));
    spans.push_back(span);
  }
  std::sort(spans.begin(), spans.end(), [](const Span& a, const Span& b) {
    return std::tie(a.item->file, a.item->offset) < std::tie(b.item->file, b.item->offset);
  });
  for (size_t i = 1; i < spans.size(); ++i) {
    const StorageItem& a = *spans[i - 1].item;
    const StorageItem& b = *spans[i].item;
    if (a.file == b.file && a.length > 0 && b.length > 0 && b.offset < a.offset + a.length) {
      return Invalid(absl::StrCat(
          "the items of ", owner(spans[i - 1]), " (", ItemText(a), ") and ", owner(spans[i]), " (",
          ItemText(b), ") overlap",
          a.offset == b.offset ? absl::StrCat(": ", kSafetensorsWriter) : std::string()));
    }
  }
  return absl::OkStatus();
}

absl::Status Validate(const Metadata& metadata, bool require_cover) {
  for (const TensorEntry& tensor : metadata.tensors) {
    SHARDKIT_RETURN_IF_ERROR(CheckChunks(tensor, require_cover));
  }
  // A key both a tensor and a bytes item (a repeated dict key in the pickle).
  size_t b = 0;
  for (const TensorEntry& tensor : metadata.tensors) {
    while (b < metadata.bytes.size() && metadata.bytes[b].fqn < tensor.fqn) ++b;
    if (b < metadata.bytes.size() && metadata.bytes[b].fqn == tensor.fqn) {
      return Invalid(absl::StrCat("key ", QuoteName(tensor.fqn), " is a tensor and a bytes item"));
    }
  }
  return CheckItems(metadata);
}

// What Metadata::digest hashes for one file (so that the files' bytes are not copied together).
void AddToDigest(std::string& digest_input, std::string_view name, std::string_view bytes) {
  absl::StrAppend(&digest_input, std::string(name), " ", bytes.size(), " ",
                  specs::Fingerprint(bytes), "\n");
}

absl::StatusOr<Metadata> ParseOne(std::string_view bytes, const std::string& source) {
  absl::StatusOr<Pickle> pickle = Pickle::Parse(bytes);
  if (!pickle.ok()) return Annotate(pickle.status(), source);
  absl::StatusOr<Metadata> metadata = internal::MetadataFromPickle(*pickle);
  if (!metadata.ok()) return Annotate(metadata.status(), source);
  return metadata;
}

// The rank files' entries combined (see the header): chunks in rank order, a box that an earlier
// rank has is a replica and dropped; a bytes item is the lowest rank's.
absl::StatusOr<Metadata> Combine(std::vector<Metadata> parts,
                                 const std::vector<std::string>& paths) {
  struct Ref {
    size_t part;
    size_t index;
    const std::string* fqn;
  };
  std::vector<Ref> refs;
  for (size_t r = 0; r < parts.size(); ++r) {
    for (size_t t = 0; t < parts[r].tensors.size(); ++t) {
      refs.push_back({r, t, &parts[r].tensors[t].fqn});
    }
  }
  std::stable_sort(refs.begin(), refs.end(),
                   [](const Ref& a, const Ref& b) { return *a.fqn < *b.fqn; });
  Metadata out;
  absl::flat_hash_set<std::pair<Shape, Shape>> boxes;
  for (size_t i = 0; i < refs.size(); ++i) {
    TensorEntry& tensor = parts[refs[i].part].tensors[refs[i].index];
    if (i == 0 || *refs[i - 1].fqn != tensor.fqn) {
      boxes.clear();
      out.tensors.push_back({tensor.fqn, tensor.dtype, tensor.shape, {}});
    }
    TensorEntry& into = out.tensors.back();
    if (into.dtype != tensor.dtype || into.shape != tensor.shape) {
      return Invalid(
          absl::StrCat(paths[refs[i].part], ": tensor ", QuoteName(tensor.fqn), " is ",
                       std::string(SafetensorsName(tensor.dtype)), " ", ShapeToString(tensor.shape),
                       " but a lower rank's metadata has it ",
                       std::string(SafetensorsName(into.dtype)), " ", ShapeToString(into.shape)));
    }
    for (Chunk& chunk : tensor.chunks) {
      if (boxes.emplace(chunk.offsets, chunk.sizes).second) into.chunks.push_back(std::move(chunk));
    }
  }
  for (Metadata& part : parts) {
    for (BytesEntry& bytes : part.bytes) out.bytes.push_back(std::move(bytes));
    for (auto& [fqn, path] : part.planner_data) out.planner_data.emplace(fqn, std::move(path));
    if (out.version.empty()) out.version = part.version;
  }
  std::stable_sort(out.bytes.begin(), out.bytes.end(),
                   [](const BytesEntry& a, const BytesEntry& b) { return a.fqn < b.fqn; });
  out.bytes.erase(
      std::unique(out.bytes.begin(), out.bytes.end(),
                  [](const BytesEntry& a, const BytesEntry& b) { return a.fqn == b.fqn; }),
      out.bytes.end());
  return out;
}

// The ranks R of the directory's `__R.metadata` files (R in decimal without leading zeros).
absl::StatusOr<std::vector<int64_t>> RankMetadataFiles(const std::string& dir) {
  std::vector<int64_t> ranks;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    constexpr std::string_view kSuffix = ".metadata";
    if (name.size() <= 2 + kSuffix.size() || name.compare(0, 2, "__") != 0 ||
        name.compare(name.size() - kSuffix.size(), kSuffix.size(), kSuffix) != 0) {
      continue;
    }
    const std::string digits = name.substr(2, name.size() - 2 - kSuffix.size());
    int64_t rank = 0;
    if (digits.find_first_not_of("0123456789") != std::string::npos ||
        (digits.size() > 1 && digits[0] == '0') || !absl::SimpleAtoi(digits, &rank)) {
      continue;
    }
    ranks.push_back(rank);
  }
  if (ec) {
    return Invalid(absl::StrCat(dir, ": cannot list the directory: ", ec.message()));
  }
  std::sort(ranks.begin(), ranks.end());
  return ranks;
}

absl::StatusOr<std::string> ReadMetadataFile(const std::string& path) {
  std::error_code ec;
  const uint64_t size = fs::file_size(path, ec);
  if (!ec && size > kMaxPickleBytes) {
    return Invalid(absl::StrCat(path, ": ", size, " bytes, more than the ", kMaxPickleBytes,
                                " a metadata file may have"));
  }
  return os::ReadWholeFile(path);
}

}  // namespace

absl::StatusOr<Metadata> ParseMetadata(std::string_view bytes, std::string_view source,
                                       bool require_cover) {
  const std::string name(source);
  SHARDKIT_ASSIGN_OR_RETURN(Metadata metadata, ParseOne(bytes, name));
  if (absl::Status status = Validate(metadata, require_cover); !status.ok()) {
    return Annotate(status, name);
  }
  metadata.files = {name};
  std::string digest_input;
  AddToDigest(digest_input, name, bytes);
  metadata.digest = specs::Fingerprint(digest_input);
  return metadata;
}

bool IsDcpDirectory(const std::string& dir) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(dir) / ".metadata", ec) ||
         fs::is_regular_file(fs::path(dir) / "__0.metadata", ec);
}

absl::StatusOr<Metadata> ReadMetadata(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) return absl::NotFoundError(absl::StrCat(dir, ": no such directory"));
  std::vector<std::string> names;
  if (fs::exists(fs::path(dir) / ".metadata", ec)) {
    names = {".metadata"};
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(std::vector<int64_t> ranks, RankMetadataFiles(dir));
    if (ranks.empty()) {
      return Invalid(absl::StrCat(dir,
                                  ": no .metadata and no __R.metadata files: not a "
                                  "torch.distributed.checkpoint directory"));
    }
    for (size_t r = 0; r < ranks.size(); ++r) {
      if (ranks[r] != static_cast<int64_t>(r)) {
        return Invalid(absl::StrCat(dir, ": __", r, ".metadata is missing (the directory has ",
                                    ranks.size(), " __R.metadata files, up to __", ranks.back(),
                                    ".metadata)"));
      }
      names.push_back(absl::StrCat("__", r, ".metadata"));
    }
  }
  std::string digest_input;
  std::vector<Metadata> parts;
  std::vector<std::string> paths;
  for (const std::string& name : names) {
    paths.push_back((fs::path(dir) / name).string());
    SHARDKIT_ASSIGN_OR_RETURN(const std::string bytes, ReadMetadataFile(paths.back()));
    AddToDigest(digest_input, name, bytes);
    SHARDKIT_ASSIGN_OR_RETURN(Metadata part, ParseOne(bytes, paths.back()));
    if (names.size() > 1) {
      // Each rank file alone: what it holds checked, naming it, before the union is.
      if (absl::Status status = Validate(part, /*require_cover=*/false); !status.ok()) {
        return Annotate(status, paths.back());
      }
    }
    parts.push_back(std::move(part));
  }
  Metadata combined;
  if (parts.size() == 1) {
    combined = std::move(parts[0]);
  } else {
    SHARDKIT_ASSIGN_OR_RETURN(combined, Combine(std::move(parts), paths));
  }
  if (absl::Status status = Validate(combined, /*require_cover=*/true); !status.ok()) {
    return Annotate(status,
                    names.size() == 1 ? paths[0] : absl::StrCat(dir, " (its __R.metadata files)"));
  }
  combined.files = std::move(names);
  combined.digest = specs::Fingerprint(digest_input);
  return combined;
}

}  // namespace shardkit::dcp
