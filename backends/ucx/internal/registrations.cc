#include "backends/ucx/internal/registrations.h"

#include <optional>

#include "core/tensor/host_memory.h"

namespace shardkit::ucx_backend {
namespace {

Registrations* shared = nullptr;  // set once, by Shared

}  // namespace

Registrations& Registrations::Shared(const UcxContext& context) {
  static std::once_flag once;
  std::call_once(once, [&context] { shared = new Registrations(context); });
  return *shared;
}

Registrations::Registrations(const UcxContext& context) : context_(context) {
  observed_ = AddHostCpuBlockUnmapObserver(&Registrations::OnUnmap);
}

ucp_mem_h Registrations::Find(const void* data, size_t size) {
  if (size < kRegisterFrom || !observed_) return nullptr;
  const std::optional<CpuBlock> block = FindHostCpuBlock(data, size);
  if (!block.has_value()) return nullptr;
  std::lock_guard<std::mutex> lock(mu_);
  auto [it, added] = blocks_.try_emplace(block->base, nullptr);
  if (!added) {
    if (it->second != nullptr) ++stats_.reused;
    return it->second;
  }
  ucp_mem_map_params_t params{};
  params.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
  params.address = block->base;
  params.length = block->bytes;
  if (context_.ucp->mem_map(context_.context, &params, &it->second) != UCS_OK) {
    it->second = nullptr;
    return nullptr;
  }
  ++stats_.registered;
  return it->second;
}

void Registrations::OnUnmap(void* base, size_t /*bytes*/) {
  if (shared != nullptr) shared->Release(base);
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
