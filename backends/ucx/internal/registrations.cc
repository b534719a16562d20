#include "backends/ucx/internal/registrations.h"

#include <atomic>
#include <optional>
#include <vector>

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
      if (it->second != nullptr) {
        ++stats_.reused;
        ++held_[it->second].uses;
      }
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
    if (added && memh != nullptr) {
      ++stats_.registered;
      held_[memh].base = block->base;
    }
    if (!added && it->second != nullptr) ++stats_.reused;
    kept = it->second;
    if (kept != nullptr) ++held_[kept].uses;
  }
  if (memh != nullptr && memh != kept) context_.ucp->mem_unmap(context_.context, memh);
  return kept;
}

bool Registrations::TakeOut(ucp_mem_h memh) {
  auto it = held_.find(memh);
  if (it == held_.end()) return false;
  Held& held = it->second;
  if (auto block = blocks_.find(held.base); block != blocks_.end() && block->second == memh) {
    blocks_.erase(block);
  }
  held.taken_out = true;
  if (held.uses > 0) return false;
  held_.erase(it);
  return true;
}

void Registrations::Withdraw(const std::vector<ucp_mem_h>& handles) {
  std::vector<ucp_mem_h> unmap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (ucp_mem_h memh : handles) {
      auto it = held_.find(memh);
      if (it == held_.end() || it->second.taken_out) continue;
      ++stats_.withdrawn;
      if (TakeOut(memh)) unmap.push_back(memh);  // only if Done came first
    }
  }
  for (ucp_mem_h memh : unmap) context_.ucp->mem_unmap(context_.context, memh);
}

void Registrations::Done(const std::vector<ucp_mem_h>& handles) {
  std::vector<ucp_mem_h> unmap;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (ucp_mem_h memh : handles) {
      auto it = held_.find(memh);
      if (it == held_.end()) continue;
      --it->second.uses;
      if (it->second.taken_out && TakeOut(memh)) unmap.push_back(memh);
    }
  }
  for (ucp_mem_h memh : unmap) context_.ucp->mem_unmap(context_.context, memh);
}

void Registrations::OnUnmap(void* base, size_t /*bytes*/) {
  if (Registrations* registrations = shared.load()) registrations->Release(base);
}

// A block unmapped while a message uses it (a caller's bug) keeps its registration until Done.
void Registrations::Release(void* base) {
  ucp_mem_h memh = nullptr;
  {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = blocks_.find(base);
    if (it == blocks_.end()) return;
    memh = it->second;
    if (memh == nullptr) {  // UCP could not register it: nothing to unmap
      blocks_.erase(it);
      return;
    }
    ++stats_.released;
    if (!TakeOut(memh)) return;  // erases `it`
  }
  context_.ucp->mem_unmap(context_.context, memh);
}

Registrations::Stats Registrations::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  Stats stats = stats_;
  stats.live = held_.size();
  return stats;
}

}  // namespace shardkit::ucx_backend
