#include "plugins/plugin_calls.hpp"

namespace mh {
namespace {

// The engine's Device has no notion of its rank, and threading one through
// every op would touch all its callers: the rank thread says which slot it
// owns once, as it starts.
thread_local PluginCalls::Slot* this_thread_slot = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

PluginCalls::PluginCalls(int32_t first_rank, int32_t ranks)
    : first_rank_(first_rank), ranks_(ranks), slots_(new Slot[size_t(ranks)]) {}

void PluginCalls::attach_this_thread(int32_t local) { this_thread_slot = &slots_[size_t(local)]; }

std::optional<PluginCalls::Stuck> PluginCalls::longer_than(std::chrono::duration<double> limit) const {
  const int64_t now = now_ns(), limit_ns = int64_t(limit.count() * 1e9);
  for (int32_t local = 0; local < ranks_; ++local) {
    const Slot& slot = slots_[size_t(local)];
    const int64_t since = slot.since_ns.load(std::memory_order_acquire);
    if (since != 0 && now - since > limit_ns) return Stuck{first_rank_ + local, slot.what.load(std::memory_order_relaxed)};
  }
  return std::nullopt;
}

ScopedPluginCall::ScopedPluginCall(const char* what) {
  PluginCalls::Slot* slot = this_thread_slot;
  if (slot == nullptr || slot->since_ns.load(std::memory_order_relaxed) != 0) return;
  slot_ = slot;
  slot_->what.store(what, std::memory_order_relaxed);
  slot_->since_ns.store(now_ns(), std::memory_order_release);
}

ScopedPluginCall::~ScopedPluginCall() {
  if (slot_ != nullptr) slot_->since_ns.store(0, std::memory_order_release);
}

}  // namespace mh
