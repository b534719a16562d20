// A strict reader of the Python pickles inside PyTorch DCP checkpoints: a directory's `.metadata`
// (pickle protocol 4 as torch 2.15 writes it) and the `data.pkl` of each item's torch.save
// archive (protocol 2). It builds a value tree and never runs anything: classes are names checked
// against an allow-list, calls are recorded (the class and its arguments), never made.
//
//   SHARDKIT_ASSIGN_OR_RETURN(Pickle pickle, Pickle::Parse(bytes));
//   Pickle::Id root = pickle.root();
//   if (pickle.kind(root) == PickleKind::kObject && pickle.global(root) == PickleGlobal::kSize) ...
//   SHARDKIT_ASSIGN_OR_RETURN(int64_t n, pickle.Int(pickle.items(args)[0], "numel"));
//
// What is read: the opcodes that CPython's pickler writes at protocols 2 to 5 for such data —
// PROTO (first, 2..5), FRAME, STOP, MARK, NONE, NEWTRUE/NEWFALSE, BININT/BININT1/BININT2,
// LONG1/LONG4 (at most 8 bytes), BINFLOAT, SHORT_BINUNICODE/BINUNICODE/BINUNICODE8,
// SHORT_BINBYTES/BINBYTES/BINBYTES8, EMPTY_TUPLE/TUPLE/TUPLE1-3, EMPTY_LIST/APPEND/APPENDS,
// EMPTY_DICT/SETITEM/SETITEMS, GLOBAL/STACK_GLOBAL, REDUCE, NEWOBJ, BUILD, BINPERSID,
// BINPUT/LONG_BINPUT/MEMOIZE, BINGET/LONG_BINGET — and only these globals (PickleGlobal):
// the dataclasses of torch.distributed.checkpoint.metadata, filesystem._StorageInfo, torch.Size,
// torch.serialization._get_layout, metadata._MEM_FORMAT_ENCODING, pathlib.PosixPath,
// collections.OrderedDict, torch._utils._rebuild_tensor_v2/_v3, the typed storages
// (torch.FloatStorage, ...), torch.UntypedStorage and the torch dtypes that have a shardkit DType.
// A class may only be used the way torch's pickles use it: the dataclasses through NEWOBJ (then
// BUILD, once), the functions and torch.Size / PosixPath / OrderedDict / the enum through REDUCE,
// dtypes and storage classes as plain values.
//
// Errors (every one kInvalidArgument, the message starting "pickle byte N: " with the offset of
// the offending opcode): any other opcode or global; a truncated stream or bytes after STOP; a
// string, frame or integer longer than the input allows; a MARK, memo index or stack item that
// is not there; a value changed (APPEND, SETITEM, BUILD) after it was put inside another value —
// which is how every memo cycle (a list holding itself, an object whose state holds it) shows,
// so the tree is always acyclic; an input over kMaxPickleBytes.
//
// Cost: one pass, time and memory linear in the input (about 40 bytes per value plus the input,
// which the tree keeps: strings are views into it). A memo reference is shared, never copied, so
// interpreters must not walk the tree in a way that expands shared values repeatedly.
#ifndef SHARDKIT_INTEGRATION_FORMATS_PICKLE_PICKLE_READER_H_
#define SHARDKIT_INTEGRATION_FORMATS_PICKLE_PICKLE_READER_H_

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "core/tensor/dtype.h"

namespace shardkit::pickle {

// Largest pickle read (ids are 32-bit; a `.metadata` of a million chunks is about 150 MB).
inline constexpr uint64_t kMaxPickleBytes = uint64_t{1} << 31;

enum class PickleKind : uint8_t {
  kNone,
  kBool,
  kInt,
  kFloat,
  kStr,
  kBytes,
  kTuple,
  kList,
  kDict,
  kGlobal,        // a class, function or value named by GLOBAL / STACK_GLOBAL
  kObject,        // a global applied to arguments (REDUCE, NEWOBJ), with BUILD's state if any
  kPersistentId,  // BINPERSID: torch.save's ("storage", type, key, location, numel)
};

// The allow-list. Module and name as pickled are in PickleGlobalName.
enum class PickleGlobal : uint8_t {
  kMetadata,  // torch.distributed.checkpoint.metadata.*
  kTensorStorageMetadata,
  kTensorProperties,
  kChunkStorageMetadata,
  kBytesStorageMetadata,
  kMetadataIndex,
  kStorageMeta,
  kMemFormatEncoding,  // metadata._MEM_FORMAT_ENCODING
  kStorageInfo,        // torch.distributed.checkpoint.filesystem._StorageInfo
  kSize,               // torch.Size
  kGetLayout,          // torch.serialization._get_layout
  kPosixPath,          // pathlib.PosixPath
  kOrderedDict,        // collections.OrderedDict
  kRebuildTensorV2,    // torch._utils._rebuild_tensor_v2
  kRebuildTensorV3,    // torch._utils._rebuild_tensor_v3
  kTypedStorage,       // torch.FloatStorage, torch.BFloat16Storage, ...: dtype() says which
  kUntypedStorage,     // torch.UntypedStorage (also as torch.storage.UntypedStorage)
  kDType,              // torch.float32, torch.float8_e4m3fn, ...: dtype() says which
};

// "torch.Size", "torch.distributed.checkpoint.metadata.Metadata", ... (dtypes and typed storages:
// the family, "torch dtype" / "torch typed storage").
std::string_view PickleGlobalName(PickleGlobal global);

// A parsed pickle: an acyclic tree of values (shared where the pickle's memo shares them) with
// its root. Values are addressed by Id. Immutable once parsed; movable and copyable.
class Pickle {
 public:
  using Id = uint32_t;
  static constexpr Id kNoValue = std::numeric_limits<Id>::max();

  // Errors: kInvalidArgument as in the file comment.
  [[nodiscard]] static absl::StatusOr<Pickle> Parse(std::string_view bytes);

  Id root() const { return root_; }
  size_t value_count() const { return nodes_.size(); }

  PickleKind kind(Id id) const { return nodes_[id].kind; }
  // Byte offset in the input of the opcode that made the value (for messages).
  uint64_t offset(Id id) const { return nodes_[id].offset; }
  // kBool (0 or 1), kInt.
  int64_t int_value(Id id) const { return nodes_[id].scalar; }
  double float_value(Id id) const;
  // kStr (UTF-8 as pickled), kBytes.
  std::string_view text(Id id) const;
  // kGlobal: the name; kObject: the global that was called.
  PickleGlobal global(Id id) const { return nodes_[id].global; }
  // kGlobal of kDType or kTypedStorage: the element type.
  DType dtype(Id id) const { return nodes_[id].dtype; }
  // kTuple, kList: the elements; kDict: key, value, key, value, ... in pickle order;
  // kPersistentId: the one pickled id. Empty for other kinds.
  std::vector<Id> items(Id id) const;
  // Number of items() (kDict: pairs).
  size_t size(Id id) const;
  // kObject: the argument tuple; the state BUILD gave it, or kNoValue.
  Id args(Id id) const { return nodes_[id].first(); }
  Id state(Id id) const { return nodes_[id].last(); }

  // "int", "str \"abc\"", "torch.Size object", "global torch.float32" ... for messages.
  std::string Describe(Id id) const;

  // Checked access for interpreters. Each error is kInvalidArgument
  // "pickle byte N: <what>: expected <kind>, found <Describe>".
  [[nodiscard]] absl::StatusOr<int64_t> Int(Id id, std::string_view what) const;
  [[nodiscard]] absl::StatusOr<bool> Bool(Id id, std::string_view what) const;
  [[nodiscard]] absl::StatusOr<std::string_view> Str(Id id, std::string_view what) const;
  // The items of a tuple of `count` elements (any count if count < 0).
  [[nodiscard]] absl::StatusOr<std::vector<Id>> Tuple(Id id, std::string_view what,
                                                      int count = -1) const;
  // The object of class `global`, for NEWOBJ classes with a dict state (or none, read as empty):
  // the state dict's str keys and values, checked against `fields` (an unknown or repeated key
  // is an error). The result has one entry per field, kNoValue where the key is absent.
  [[nodiscard]] absl::StatusOr<std::vector<Id>> DataclassFields(
      Id id, PickleGlobal global, const std::vector<std::string_view>& fields,
      std::string_view what) const;
  // The arguments of a REDUCE of `global`, which must have `count` items (any if count < 0).
  [[nodiscard]] absl::StatusOr<std::vector<Id>> ReduceArgs(Id id, PickleGlobal global,
                                                           std::string_view what,
                                                           int count = -1) const;
  // The error above for a value that is not what `what` expects.
  [[nodiscard]] absl::Status Unexpected(Id id, std::string_view what,
                                        std::string_view expected) const;

 private:
  friend class PickleParser;

  // 24 bytes: a `.metadata` has about one value per 5 bytes.
  struct Node {
    PickleKind kind = PickleKind::kNone;
    PickleGlobal global = PickleGlobal::kMetadata;
    DType dtype = DType::kFloat32;
    bool sealed = false;  // inside another value: may no longer change
    uint32_t size = 0;    // items of a container; bytes of a kStr / kBytes
    uint32_t offset = 0;  // of the opcode (inputs are under 4 GiB)
    // kBool, kInt: the value; kFloat: its bits; kStr / kBytes: its start in input_. Else two links
    // (first(), last()): containers, their first and last segment of items (kNoValue: none);
    // kObject, its args and state; kPersistentId, the pickled id.
    int64_t scalar = 0;

    uint32_t first() const { return static_cast<uint32_t>(static_cast<uint64_t>(scalar)); }
    uint32_t last() const { return static_cast<uint32_t>(static_cast<uint64_t>(scalar) >> 32); }
    void set_links(uint32_t first, uint32_t last) {
      scalar = static_cast<int64_t>((uint64_t{last} << 32) | first);
    }
  };
  // Items of a container arrive in batches (APPENDS, SETITEMS); each is one run in children_.
  struct Segment {
    uint32_t begin = 0;
    uint32_t count = 0;
    uint32_t next = kNoValue;
  };

  std::string input_;
  std::vector<Node> nodes_;
  std::vector<Segment> segments_;
  std::vector<Id> children_;
  Id root_ = kNoValue;
};

}  // namespace shardkit::pickle

#endif  // SHARDKIT_INTEGRATION_FORMATS_PICKLE_PICKLE_READER_H_
