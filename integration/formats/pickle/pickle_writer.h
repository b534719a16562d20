// PickleWriter: emits pickle opcodes (protocol 2, as Python's pickle.dumps(obj, protocol=2) spells
// them) for the files shardkit writes in torch's formats — a DCP checkpoint's `.metadata`
// (metadata_writer.h) and a torch.save archive's data.pkl (torch_zip_writer.h) — and for the test
// pickles of the readers (test_util.h). It writes what the caller says, in order: nothing checks
// that the opcodes make one valid object (the readers and Python's pickle do, in the tests).
//
//   PickleWriter w;                              // PROTO 2
//   w.Global("collections", "OrderedDict");      // GLOBAL, memoized: a second one is a BINGET
//   w.Raw(")R");                                 // EMPTY_TUPLE, REDUCE
//   w.Put();                                     // BINPUT, as Python memoizes what it made
//   std::string bytes = w.Finish();              // ... STOP
//
// No errors: every input has an encoding.
#ifndef SHARDKIT_INTEGRATION_FORMATS_PICKLE_PICKLE_WRITER_H_
#define SHARDKIT_INTEGRATION_FORMATS_PICKLE_PICKLE_WRITER_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "core/tensor/shape.h"

namespace shardkit::pickle {

class PickleWriter {
 public:
  PickleWriter();

  // Opcodes as they are.
  void Raw(std::string_view bytes) { out_ += bytes; }

  // GLOBAL "module\nname\n", memoized: written once, then fetched from the memo.
  void Global(std::string_view module, std::string_view name);
  // BINUNICODE (not memoized: follow it with Put() to memoize as Python does).
  void Str(std::string_view text);
  // A string written once, then a memo reference.
  void MemoStr(std::string_view text);
  // The smallest of BININT1, BININT2, BININT and LONG1, as Python picks them.
  void Int(int64_t value);
  void None() { out_ += 'N'; }
  void Bool(bool value) { out_ += value ? '\x88' : '\x89'; }

  // A tuple: BeginTuple(n), its n items, EndTuple(n). MARK ... TUPLE for more than 3 items,
  // EMPTY_TUPLE or TUPLE1/2/3 otherwise (as Python writes them; not memoized).
  void BeginTuple(size_t n);
  void EndTuple(size_t n);
  // A tuple of ints, memoized (BINPUT) unless empty, as Python does for a tuple it pickles.
  void IntTuple(const Shape& values);
  // torch.Size((d0, d1, ...)).
  void Size(const Shape& shape);

  // Memoizes the value on top of the stack under the next memo index (BINPUT / LONG_BINPUT).
  void Put();

  // A dataclass made by NEWOBJ whose dict state follows as MemoStr key / value pairs; then
  // EndDataclass. A non-empty `memo_key` memoizes the object under that key (for Get).
  void BeginDataclass(std::string_view module, std::string_view name,
                      std::string_view memo_key = "");
  void EndDataclass() { out_ += "ub"; }
  // A memo reference to what was memoized under `key` (Global's, MemoStr's or BeginDataclass's).
  // An unknown key writes bytes that no pickle reader accepts (a test's way to break a pickle).
  void Get(std::string_view key);

  // The pickle so far, ended with STOP.
  std::string Finish() const { return out_ + "."; }

 private:
  void Memoize(std::string key);
  bool Fetch(const std::string& key);

  std::string out_;
  absl::flat_hash_map<std::string, uint32_t> memo_;
  uint32_t next_memo_ = 0;
};

}  // namespace shardkit::pickle

#endif  // SHARDKIT_INTEGRATION_FORMATS_PICKLE_PICKLE_WRITER_H_
