#include "integration/formats/pickle/pickle_reader.h"

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "core/base/quote.h"
#include "core/base/status_macros.h"
#include "integration/formats/pickle/internal/pickle_globals.h"

namespace shardkit::pickle {
namespace {

using internal::GlobalUse;
using internal::ResolvedGlobal;
using internal::ResolveGlobal;
using internal::UseOf;

std::string OpcodeText(uint8_t op) {
  if (op >= 0x21 && op < 0x7f) return absl::StrFormat("0x%02x ('%c')", op, op);
  return absl::StrFormat("0x%02x", op);
}

}  // namespace

// One pass over the opcodes; see the header for what is accepted.
class PickleParser {
 public:
  PickleParser(std::string_view bytes, Pickle& out) : out_(out) {
    out_.input_.assign(bytes.data(), bytes.size());
    data_ = reinterpret_cast<const uint8_t*>(out_.input_.data());
    size_ = out_.input_.size();
    if (size_ <= kMaxPickleBytes) {
      // torch's pickles hold about one value per 5 bytes; reserving spares the copies of growth
      // (and costs only address space until used).
      out_.nodes_.reserve(size_ / 4);
      out_.children_.reserve(size_ / 4);
    }
  }

  absl::Status Run() {
    if (size_ > kMaxPickleBytes) {
      return Error(absl::StrCat("the pickle has ", size_, " bytes, more than the ", kMaxPickleBytes,
                                " read"));
    }
    while (true) {
      op_offset_ = pos_;
      SHARDKIT_ASSIGN_OR_RETURN(const uint8_t op, Byte("an opcode"));
      if (op_offset_ == 0 && op != 0x80) {
        return Error(absl::StrCat("not a pickle of protocol 2 or later: first opcode ",
                                  OpcodeText(op), ", not PROTO"));
      }
      if (op == '.') return Stop();
      SHARDKIT_RETURN_IF_ERROR(Step(op));
    }
  }

 private:
  using Id = Pickle::Id;

  absl::Status Error(const std::string& message) const {
    return absl::InvalidArgumentError(absl::StrCat("pickle byte ", op_offset_, ": ", message));
  }

  // --- input ---------------------------------------------------------------------------------
  absl::Status Need(uint64_t count, const std::string& what) const {
    if (count > size_ - pos_) {
      return Error(
          absl::StrCat("truncated: ", what, " needs ", count, " bytes, ", size_ - pos_, " left"));
    }
    return absl::OkStatus();
  }
  absl::StatusOr<uint8_t> Byte(const std::string& what) {
    SHARDKIT_RETURN_IF_ERROR(Need(1, what));
    return data_[pos_++];
  }
  // `count` bytes little-endian (count <= 8).
  absl::StatusOr<uint64_t> Unsigned(int count, const std::string& what) {
    SHARDKIT_RETURN_IF_ERROR(Need(count, what));
    uint64_t value = 0;
    for (int i = count - 1; i >= 0; --i) value = (value << 8) | data_[pos_ + i];
    pos_ += count;
    return value;
  }

  // --- values and the stack -------------------------------------------------------------------
  absl::StatusOr<Id> NewValue(PickleKind kind) {
    if (out_.nodes_.size() >= Pickle::kNoValue - 1) return Error("too many values");
    Pickle::Node node;
    node.kind = kind;
    node.offset = static_cast<uint32_t>(op_offset_);  // < kMaxPickleBytes
    if (kind == PickleKind::kTuple || kind == PickleKind::kList || kind == PickleKind::kDict ||
        kind == PickleKind::kObject || kind == PickleKind::kPersistentId) {
      node.set_links(Pickle::kNoValue, Pickle::kNoValue);
    }
    out_.nodes_.push_back(node);
    return static_cast<Id>(out_.nodes_.size() - 1);
  }
  absl::Status PushNew(PickleKind kind) {
    SHARDKIT_ASSIGN_OR_RETURN(const Id id, NewValue(kind));
    stack_.push_back(id);
    return absl::OkStatus();
  }
  absl::Status PushScalar(PickleKind kind, int64_t value) {
    SHARDKIT_ASSIGN_OR_RETURN(const Id id, NewValue(kind));
    out_.nodes_[id].scalar = value;
    stack_.push_back(id);
    return absl::OkStatus();
  }
  size_t FrameStart() const { return marks_.empty() ? 0 : marks_.back(); }
  absl::StatusOr<Id> Pop(const char* what) {
    if (stack_.size() <= FrameStart()) return Error(absl::StrCat("stack empty: no ", what));
    const Id id = stack_.back();
    stack_.pop_back();
    return id;
  }
  absl::StatusOr<Id> Top(const char* what) const {
    if (stack_.size() <= FrameStart()) return Error(absl::StrCat("stack empty: no ", what));
    return stack_.back();
  }
  // Where the items an opcode takes start on the stack: above the last MARK (which is removed),
  // or the top `count`. They stay on the stack until AddItems.
  absl::StatusOr<size_t> ItemsStart(bool from_mark, size_t count, const char* what) {
    if (from_mark) {
      if (marks_.empty()) return Error("no MARK before it");
      const size_t start = marks_.back();
      marks_.pop_back();
      return start;
    }
    if (stack_.size() < FrameStart() + count) return Error(absl::StrCat("stack empty: no ", what));
    return stack_.size() - count;
  }
  // The value just below the items at `start`: the container they go into.
  absl::StatusOr<Id> Below(size_t start, const char* what) const {
    if (start <= FrameStart()) return Error(absl::StrCat("stack empty: no ", what));
    return stack_[start - 1];
  }
  void Seal(size_t start) {
    for (size_t i = start; i < stack_.size(); ++i) out_.nodes_[stack_[i]].sealed = true;
  }
  // `target` is about to change: it must not be inside another value yet (else a cycle may form).
  absl::Status CheckMutable(Id target) const {
    if (out_.nodes_[target].sealed) {
      return Error(absl::StrCat("a memo cycle: the ", out_.Describe(target), " made at byte ",
                                out_.offset(target),
                                " is changed after it was put inside another value"));
    }
    return absl::OkStatus();
  }
  // Moves the stack's items from `start` on into container `id`, as one segment.
  void AddItems(Id id, size_t start) {
    const size_t count = stack_.size() - start;
    if (count > 0) {
      Pickle::Segment segment;
      segment.begin = static_cast<uint32_t>(out_.children_.size());
      segment.count = static_cast<uint32_t>(count);
      out_.children_.insert(out_.children_.end(), stack_.begin() + static_cast<ptrdiff_t>(start),
                            stack_.end());
      const auto index = static_cast<uint32_t>(out_.segments_.size());
      out_.segments_.push_back(segment);
      Pickle::Node& node = out_.nodes_[id];
      if (node.first() == Pickle::kNoValue) {
        node.set_links(index, index);
      } else {
        out_.segments_[node.last()].next = index;
        node.set_links(node.first(), index);
      }
      node.size += segment.count;
    }
    stack_.resize(start);
  }

  // --- opcodes ---------------------------------------------------------------------------------
  absl::Status Step(uint8_t op) {
    switch (op) {
      case 0x80:  // PROTO
        return Proto();
      case 0x95: {  // FRAME: a hint for buffering; only its length is checked
        SHARDKIT_ASSIGN_OR_RETURN(const uint64_t length, Unsigned(8, "FRAME"));
        return Need(length, "FRAME");
      }
      case '(':  // MARK
        marks_.push_back(stack_.size());
        return absl::OkStatus();
      case 'N':
        return PushNew(PickleKind::kNone);
      case 0x88:  // NEWTRUE
        return PushScalar(PickleKind::kBool, 1);
      case 0x89:  // NEWFALSE
        return PushScalar(PickleKind::kBool, 0);
      case 'J': {  // BININT
        SHARDKIT_ASSIGN_OR_RETURN(const uint64_t value, Unsigned(4, "BININT"));
        return PushScalar(PickleKind::kInt, static_cast<int32_t>(static_cast<uint32_t>(value)));
      }
      case 'K':  // BININT1
        return PushUnsigned(1);
      case 'M':  // BININT2
        return PushUnsigned(2);
      case 0x8a:  // LONG1
        return Long(1);
      case 0x8b:  // LONG4
        return Long(4);
      case 'G':  // BINFLOAT
        return Float();
      case 0x8c:  // SHORT_BINUNICODE
        return Text(PickleKind::kStr, 1);
      case 'X':  // BINUNICODE
        return Text(PickleKind::kStr, 4);
      case 0x8d:  // BINUNICODE8
        return Text(PickleKind::kStr, 8);
      case 'C':  // SHORT_BINBYTES
        return Text(PickleKind::kBytes, 1);
      case 'B':  // BINBYTES
        return Text(PickleKind::kBytes, 4);
      case 0x8e:  // BINBYTES8
        return Text(PickleKind::kBytes, 8);
      case ')':  // EMPTY_TUPLE
        return PushNew(PickleKind::kTuple);
      case 't':  // TUPLE
        return Tuple(/*from_mark=*/true, 0);
      case 0x85:  // TUPLE1
      case 0x86:  // TUPLE2
      case 0x87:  // TUPLE3
        return Tuple(/*from_mark=*/false, op - 0x84);
      case ']':  // EMPTY_LIST
        return PushNew(PickleKind::kList);
      case '}':  // EMPTY_DICT
        return PushNew(PickleKind::kDict);
      case 'a':  // APPEND
      case 'e':  // APPENDS
        return Insert(PickleKind::kList, op == 'e');
      case 's':  // SETITEM
      case 'u':  // SETITEMS
        return Insert(PickleKind::kDict, op == 'u');
      case 'c':  // GLOBAL
        return Global();
      case 0x93:  // STACK_GLOBAL
        return StackGlobal();
      case 'R':  // REDUCE
        return Call(GlobalUse::kReduce, "REDUCE");
      case 0x81:  // NEWOBJ
        return Call(GlobalUse::kNewObj, "NEWOBJ");
      case 'b':  // BUILD
        return Build();
      case 'Q':  // BINPERSID
        return PersistentId();
      case 'q':  // BINPUT
        return Put(1);
      case 'r':  // LONG_BINPUT
        return Put(4);
      case 0x94:  // MEMOIZE
        return Memoize();
      case 'h':  // BINGET
        return Get(1);
      case 'j':  // LONG_BINGET
        return Get(4);
      default:
        return Error(
            absl::StrCat("opcode ", OpcodeText(op), " is not one a DCP checkpoint's pickle uses"));
    }
  }

  absl::Status Proto() {
    SHARDKIT_ASSIGN_OR_RETURN(const uint8_t version, Byte("PROTO"));
    if (op_offset_ != 0) return Error("PROTO after the first opcode");
    if (version < 2 || version > 5) {
      return Error(absl::StrCat("pickle protocol ", version, " (2 to 5 are read)"));
    }
    return absl::OkStatus();
  }

  absl::Status PushUnsigned(int bytes) {
    SHARDKIT_ASSIGN_OR_RETURN(const uint64_t value, Unsigned(bytes, "BININT"));
    return PushScalar(PickleKind::kInt, static_cast<int64_t>(value));
  }

  // LONG1 / LONG4: a little-endian two's complement integer of n bytes; at most 8 are read.
  absl::Status Long(int length_bytes) {
    SHARDKIT_ASSIGN_OR_RETURN(const uint64_t length, Unsigned(length_bytes, "LONG length"));
    if (length > 8) {
      return Error(absl::StrCat("an integer of ", length, " bytes (at most 8 are read)"));
    }
    SHARDKIT_RETURN_IF_ERROR(Need(length, "LONG"));
    uint64_t value = 0;
    for (int i = static_cast<int>(length) - 1; i >= 0; --i) value = (value << 8) | data_[pos_ + i];
    if (length > 0 && length < 8 && (data_[pos_ + length - 1] & 0x80) != 0) {
      value |= ~uint64_t{0} << (8 * length);  // sign extension
    }
    pos_ += length;
    return PushScalar(PickleKind::kInt, static_cast<int64_t>(value));
  }

  absl::Status Float() {
    SHARDKIT_RETURN_IF_ERROR(Need(8, "BINFLOAT"));
    uint64_t bits = 0;
    for (int i = 0; i < 8; ++i) bits = (bits << 8) | data_[pos_ + i];  // big-endian
    pos_ += 8;
    return PushScalar(PickleKind::kFloat, static_cast<int64_t>(bits));
  }

  absl::Status Text(PickleKind kind, int length_bytes) {
    SHARDKIT_ASSIGN_OR_RETURN(const uint64_t length, Unsigned(length_bytes, "a string length"));
    SHARDKIT_RETURN_IF_ERROR(Need(length, kind == PickleKind::kStr ? "a str" : "a bytes"));
    const std::string_view text(reinterpret_cast<const char*>(data_ + pos_), length);
    if (kind == PickleKind::kStr && !IsValidUtf8(text)) return Error("a str that is not UTF-8");
    SHARDKIT_ASSIGN_OR_RETURN(const Id id, NewValue(kind));
    out_.nodes_[id].scalar = static_cast<int64_t>(pos_);
    out_.nodes_[id].size = static_cast<uint32_t>(length);  // < kMaxPickleBytes
    pos_ += length;
    stack_.push_back(id);
    return absl::OkStatus();
  }

  absl::Status Tuple(bool from_mark, size_t count) {
    SHARDKIT_ASSIGN_OR_RETURN(const size_t start, ItemsStart(from_mark, count, "tuple item"));
    SHARDKIT_ASSIGN_OR_RETURN(const Id id, NewValue(PickleKind::kTuple));
    Seal(start);
    AddItems(id, start);
    stack_.push_back(id);
    return absl::OkStatus();
  }

  // APPEND(S) and SETITEM(S): items into the list or dict below them.
  absl::Status Insert(PickleKind kind, bool many) {
    const bool dict = kind == PickleKind::kDict;
    SHARDKIT_ASSIGN_OR_RETURN(const size_t start,
                              ItemsStart(many, dict ? 2 : 1, dict ? "key and value" : "item"));
    if (dict && (stack_.size() - start) % 2 != 0) {
      return Error("SETITEMS with an odd number of items");
    }
    SHARDKIT_ASSIGN_OR_RETURN(const Id target, Below(start, dict ? "dict" : "list"));
    if (out_.kind(target) != kind) {
      return Error(absl::StrCat(dict ? "SETITEM on a " : "APPEND to a ", out_.Describe(target),
                                dict ? ", not a dict" : ", not a list"));
    }
    Seal(start);  // first: a container appended to itself is then sealed, and refused
    SHARDKIT_RETURN_IF_ERROR(CheckMutable(target));
    AddItems(target, start);
    return absl::OkStatus();
  }

  absl::Status PushGlobal(std::string_view module, std::string_view name) {
    const std::optional<ResolvedGlobal> resolved = ResolveGlobal(module, name);
    if (!resolved.has_value()) {
      return Error(absl::StrCat(
          "global ", QuoteName(absl::StrCat(std::string(module), ".", std::string(name))),
          " is not allowed (not one a DCP checkpoint's pickle uses)"));
    }
    SHARDKIT_ASSIGN_OR_RETURN(const Id id, NewValue(PickleKind::kGlobal));
    out_.nodes_[id].global = resolved->global;
    out_.nodes_[id].dtype = resolved->dtype;
    stack_.push_back(id);
    return absl::OkStatus();
  }

  // GLOBAL's operands: "module\nname\n".
  absl::StatusOr<std::string_view> Line() {
    constexpr size_t kMaxLine = 256;
    const size_t start = pos_;
    while (pos_ < size_ && pos_ - start <= kMaxLine && data_[pos_] != '\n') ++pos_;
    if (pos_ >= size_) return Error("truncated: GLOBAL without its newline");
    if (pos_ - start > kMaxLine) return Error("GLOBAL with a name over 256 bytes");
    ++pos_;
    return std::string_view(reinterpret_cast<const char*>(data_ + start), pos_ - 1 - start);
  }
  absl::Status Global() {
    SHARDKIT_ASSIGN_OR_RETURN(const std::string_view module, Line());
    SHARDKIT_ASSIGN_OR_RETURN(const std::string_view name, Line());
    return PushGlobal(module, name);
  }
  absl::Status StackGlobal() {
    SHARDKIT_ASSIGN_OR_RETURN(const Id name, Pop("STACK_GLOBAL name"));
    SHARDKIT_ASSIGN_OR_RETURN(const Id module, Pop("STACK_GLOBAL module"));
    if (out_.kind(name) != PickleKind::kStr || out_.kind(module) != PickleKind::kStr) {
      return Error("STACK_GLOBAL of values that are not str");
    }
    return PushGlobal(out_.text(module), out_.text(name));
  }

  // REDUCE (callable, args) and NEWOBJ (class, args): an object recording the call.
  absl::Status Call(GlobalUse use, const char* opcode) {
    SHARDKIT_ASSIGN_OR_RETURN(const Id args, Pop("arguments"));
    SHARDKIT_ASSIGN_OR_RETURN(const Id callee, Pop("callable"));
    if (out_.kind(args) != PickleKind::kTuple) {
      return Error(absl::StrCat(opcode, " with arguments that are a ", out_.Describe(args),
                                ", not a tuple"));
    }
    if (out_.kind(callee) != PickleKind::kGlobal || UseOf(out_.global(callee)) != use) {
      return Error(absl::StrCat(opcode, " of a ", out_.Describe(callee), ", which torch's ",
                                "pickles never ",
                                use == GlobalUse::kReduce ? "call" : "instantiate"));
    }
    if (use == GlobalUse::kNewObj && out_.size(args) != 0) {
      return Error(absl::StrCat("NEWOBJ of ", std::string(PickleGlobalName(out_.global(callee))),
                                " with arguments"));
    }
    SHARDKIT_ASSIGN_OR_RETURN(const Id id, NewValue(PickleKind::kObject));
    out_.nodes_[args].sealed = true;
    out_.nodes_[id].global = out_.global(callee);
    out_.nodes_[id].set_links(args, Pickle::kNoValue);
    stack_.push_back(id);
    return absl::OkStatus();
  }

  absl::Status Build() {
    SHARDKIT_ASSIGN_OR_RETURN(const Id state, Pop("BUILD state"));
    SHARDKIT_ASSIGN_OR_RETURN(const Id object, Top("object to BUILD"));
    if (out_.kind(object) != PickleKind::kObject ||
        UseOf(out_.global(object)) != GlobalUse::kNewObj) {
      return Error(absl::StrCat("BUILD of a ", out_.Describe(object),
                                ", not of a dataclass made by NEWOBJ"));
    }
    out_.nodes_[state].sealed = true;
    SHARDKIT_RETURN_IF_ERROR(CheckMutable(object));
    if (out_.state(object) != Pickle::kNoValue) {
      return Error(absl::StrCat("a second BUILD of the ", out_.Describe(object)));
    }
    out_.nodes_[object].set_links(out_.args(object), state);
    return absl::OkStatus();
  }

  absl::Status PersistentId() {
    SHARDKIT_ASSIGN_OR_RETURN(const Id pid, Pop("persistent id"));
    SHARDKIT_ASSIGN_OR_RETURN(const Id id, NewValue(PickleKind::kPersistentId));
    out_.nodes_[pid].sealed = true;
    out_.nodes_[id].set_links(pid, Pickle::kNoValue);
    out_.nodes_[id].size = 1;
    stack_.push_back(id);
    return absl::OkStatus();
  }

  // The memo: indices are given out in order (as CPython's pickler does); none is reused.
  absl::Status Put(int index_bytes) {
    SHARDKIT_ASSIGN_OR_RETURN(const uint64_t index, Unsigned(index_bytes, "memo index"));
    if (index != memo_.size()) {
      return Error(
          absl::StrCat("memo index ", index, " out of order (next is ", memo_.size(), ")"));
    }
    return Memoize();
  }
  absl::Status Memoize() {
    SHARDKIT_ASSIGN_OR_RETURN(const Id top, Top("value to memoize"));
    memo_.push_back(top);
    return absl::OkStatus();
  }
  absl::Status Get(int index_bytes) {
    SHARDKIT_ASSIGN_OR_RETURN(const uint64_t index, Unsigned(index_bytes, "memo index"));
    if (index >= memo_.size()) {
      return Error(absl::StrCat("memo index ", index, " was never set (", memo_.size(), " are)"));
    }
    stack_.push_back(memo_[index]);
    return absl::OkStatus();
  }

  absl::Status Stop() {
    if (!marks_.empty()) return Error("STOP inside a MARK");
    if (stack_.size() != 1) {
      return Error(absl::StrCat("STOP with ", stack_.size(), " values on the stack, not 1"));
    }
    if (pos_ != size_) return Error(absl::StrCat(size_ - pos_, " bytes after STOP"));
    out_.root_ = stack_.back();
    return absl::OkStatus();
  }

  Pickle& out_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t pos_ = 0;
  uint64_t op_offset_ = 0;
  std::vector<Id> stack_;
  std::vector<size_t> marks_;  // stack sizes at each MARK
  std::vector<Id> memo_;
};

absl::StatusOr<Pickle> Pickle::Parse(std::string_view bytes) {
  Pickle pickle;
  PickleParser parser(bytes, pickle);
  SHARDKIT_RETURN_IF_ERROR(parser.Run());
  return pickle;
}

}  // namespace shardkit::pickle
