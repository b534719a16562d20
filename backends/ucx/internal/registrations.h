// Memory registered with UCP once per block of the host's CPU allocator, and reused.
//
// Every large message a UCX communicator sends or receives from a block the host allocator mapped
// (core/tensor/allocator.h: shards, staging, the allocator's cache) goes with a handle from
// ucp_mem_map of the whole block, made on the block's first message and kept until the allocator
// unmaps it (its unmap observer) or an exchange that used it fails: a block handed out again from
// the allocator's cache keeps its registration. On one host (shared memory, CMA) registering costs
// nothing and changes nothing; with RDMA it is what spares each message a registration (pinning) of
// its own. Other memory (small blocks, tensors of other frameworks) goes without a handle: UCX
// registers it per message.
//
//   Registrations& registrations = Registrations::Shared(context);
//   if (ucp_mem_h memh = registrations.Find(data, size)) { ...UCP_OP_ATTR_FIELD_MEMH... }
//   ...                                      // the exchange; if it failed:
//   registrations.Withdraw(handles);         // then, once none of its messages is in flight:
//   registrations.Done(handles);
#ifndef SHARDKIT_BACKENDS_UCX_INTERNAL_REGISTRATIONS_H_
#define SHARDKIT_BACKENDS_UCX_INTERNAL_REGISTRATIONS_H_

#include <ucp/api/ucp.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

#include "backends/ucx/internal/ucx_context.h"

namespace shardkit::ucx_backend {

class Registrations {
 public:
  // Messages below this size go without a handle (eager protocols copy them anyway).
  static constexpr size_t kRegisterFrom = size_t{64} << 10;

  // The process's, for the shared context (one per process); the first call adds its observer to
  // the host allocator. Thread-safe; every method and the observer may run on any threads. With
  // RDMA, a block stays pinned while it is registered (also while the allocator's cache holds it).
  static Registrations& Shared(const UcxContext& context);

  // The handle of the allocator block that holds [data, data + size), registered on first use,
  // for one message: Done gives it back; null below kRegisterFrom, for memory the allocator did
  // not map, when the allocator takes no more observers, or when UCP cannot register the block
  // (then UCX registers per message).
  ucp_mem_h Find(const void* data, size_t size);

  // A failed exchange's handles: each leaves the lookup at once (its block's next message
  // registers anew) and is unregistered as soon as no message uses it (another communicator's, on
  // another thread, may). A peer that has not noticed the failure may still hold the block's key;
  // with RDMA its late reads and writes then fail instead of reaching memory the allocator hands
  // to a new tensor. Call it before the failure is handled (which may take seconds).
  void Withdraw(const std::vector<ucp_mem_h>& handles);

  // The handles an exchange's messages were given, given back once none of those messages is in
  // flight; a withdrawn one that no message uses any more is unregistered.
  void Done(const std::vector<ucp_mem_h>& handles);

  struct Stats {
    int64_t registered = 0;  // blocks registered (ucp_mem_map)
    int64_t reused = 0;      // messages that found their block registered already
    int64_t released = 0;    // taken out because the allocator unmapped the block
    int64_t withdrawn = 0;   // taken out because an exchange using them failed
    // Registrations not yet unregistered (those taken out while a message uses them included).
    size_t live = 0;
  };
  Stats stats() const;

 private:
  explicit Registrations(const UcxContext& context);
  // The allocator's unmap observer: drops the block's registration, if any.
  static void OnUnmap(void* base, size_t bytes);
  void Release(void* base);
  // Takes `memh` out of blocks_ (its block's next message registers anew) and marks it taken
  // out; when no message uses it any more, also erases its record in held_ and returns true: the
  // caller unmaps it, outside mu_. Under mu_.
  bool TakeOut(ucp_mem_h memh);

  // A registration: its block, the messages using it now, whether it is taken out.
  struct Held {
    const void* base = nullptr;
    int64_t uses = 0;
    bool taken_out = false;
  };

  const UcxContext context_;
  bool observed_ = false;  // whether the allocator will say when a block is unmapped
  mutable std::mutex mu_;
  std::map<const void*, ucp_mem_h> blocks_;  // null: UCP could not register it
  std::map<ucp_mem_h, Held> held_;           // every registration not yet (being) unmapped
  Stats stats_;
};

}  // namespace shardkit::ucx_backend

#endif  // SHARDKIT_BACKENDS_UCX_INTERNAL_REGISTRATIONS_H_
