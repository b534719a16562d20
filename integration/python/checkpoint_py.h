// The checkpoint commands as Python calls, over integration/checkpoint's library, each returning
// what the CLI prints as data (and its text, laid out by integration/report as the CLI lays it
// out): _core.inspect (`shardkit inspect`), _core.spec_check (`spec check`),
// _core.gather_checkpoint
// (`gather`), _core.shard_checkpoint and _core.reshard_checkpoint (`shard`, `reshard`: one rank of
// a communicator each). shardkit/_checkpoint.py wraps them.
#ifndef SHARDKIT_INTEGRATION_PYTHON_CHECKPOINT_PY_H_
#define SHARDKIT_INTEGRATION_PYTHON_CHECKPOINT_PY_H_

#include <cstdint>
#include <ostream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "pybind11/pybind11.h"

namespace shardkit::python {

// What a checkpoint call writes on its log (warnings, progress lines): kept, and with `echo`
// also written to stderr as it comes, as the CLI writes it. Use from one thread.
class CallLog {
 public:
  explicit CallLog(bool echo);
  std::ostream& stream() { return out_; }
  // The lines written so far, without their '\n'.
  std::vector<std::string> lines() const;

 private:
  class Tee : public std::stringbuf {
   public:
    explicit Tee(bool echo) : echo_(echo) {}

   protected:
    std::streamsize xsputn(const char* s, std::streamsize n) override;
    int_type overflow(int_type c) override;

   private:
    bool echo_;
  };
  Tee buffer_;
  std::ostream out_;
};

// The memory budget of a checkpoint call (memory_bytes=). Errors: kInvalidArgument "memory_bytes
// must be positive, got N".
absl::Status CheckMemoryBytes(int64_t memory_bytes);

// Adds inspect(), spec_check() and gather_checkpoint() to module `m` (checkpoint_py.cc), and
// shard_checkpoint() and reshard_checkpoint() (shard_checkpoint_py.cc).
void BindCheckpoint(pybind11::module_& m);
void BindShardCheckpoint(pybind11::module_& m);

}  // namespace shardkit::python

#endif  // SHARDKIT_INTEGRATION_PYTHON_CHECKPOINT_PY_H_
