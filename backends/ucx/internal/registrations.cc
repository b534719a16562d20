#include "backends/ucx/internal/registrations.h"

#include <atomic>
#include <optional>

#include "core/tensor/host_memory.h"

namespace shardkit::ucx_backend {
namespace {

// Set once, by Shared, before the observer that reads it is added.
std::atomic<Registrations*> shared{nullptr};

}  // namespace

Registrations& Registrations::Shared(const UcxContext& context) {
  static std::once_flag once;
  std::call_once(once, [&context] {
    auto* registrations = new Registrations(context);
    shared.store(registrations);
    registrations->observed_ = AddHostCpuBlockUnmapObserver(&Registrations::OnUnmap);
  });
  return *shared.load();
}

Registrations::Registrations(const UcxContext& context) : context_(context) {}

ucp_mem_h Registrations::Find(const void* data, size_t size) {
  if (size < kRegisterFrom || !observed_) return nullptr;
  const std::optional<CpuBlock> block = FindHostCpuBlock(data, size);
  if (!block.has_value()) return nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (auto it = blocks_.find(block->base); it != blocks_.end()) {
      if (it->second != nullptr) ++stats_.reused;
      return it->second;
    }
  }
  // Registered outside the lock (with RDMA, pinning a large block takes a while): a thread that
  // registered the same block meanwhile wins, and this registration is undone.
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = block->base;
  params.length = block->bytes;
  ucp_mem_h memh = nullptr;
  if (context_.ucp->mem_map(context_.context, &params, &memh) != UCS_OK) memh = nullptr;
  ucp_mem_h kept = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto [it, added] = blocks_.try_emplace(block->base, memh);  // null: UCP could not
    if (added && memh != nullptr) ++stats_.registered;
    if (!added && it->second != nullptr) ++stats_.reused;
    kept = it->second;
  }
  if (memh != nullptr && memh != kept) context_.ucp->mem_unmap(context_.context, memh);
  return kept;
}

void Registrations::OnUnmap(void* base, size_t /*bytes*/) {
  if (Registrations* registrations = shared.load()) registrations->Release(base);
}

void Registrations::Release(void* base) {
  ucp_mem_h memh = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(base);
    if (it == blocks_.end()) return;
    memh = it->second;
    blocks_.erase(it);
    if (memh != nullptr) ++stats_.released;
  }
  if (memh != nullptr) context_.ucp->mem_unmap(context_.context, memh);
}

Registrations::Stats Registrations::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats stats = stats_;
  stats.live = static_cast<size_t>(stats_.registered - stats_.released);
  return stats;
}

}  // namespace shardkit::ucx_backend
