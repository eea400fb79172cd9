#include "plugins/observer.hpp"

#include <chrono>

namespace mh {
namespace {

thread_local const ObserverAttachment* this_thread_observer = nullptr;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

RankObserver::RankObserver(const Assembly& assembly, int32_t ranks_in_process, int32_t rank)
    : previous_(this_thread_observer) {
  const Slot* slot = assembly.slot(MH_KIND_OBSERVER);
  if (slot == nullptr) return;
  instance_ = std::make_unique<Instance>(*slot, ranks_in_process, rank);
  attached_ = ObserverAttachment{instance_->api<MH_ObserverApi>(), instance_->get(), rank};
  this_thread_observer = &attached_;
}

RankObserver::~RankObserver() {
  if (instance_ != nullptr) this_thread_observer = previous_;
}

ObservedCall::ObservedCall(MH_EventType type, const char* name, const char* group, uint64_t bytes)
    : observer_(this_thread_observer) {
  if (observer_ == nullptr) return;
  event_.struct_size = sizeof(event_);
  event_.type = type;
  event_.rank = observer_->rank;
  event_.name = name;
  event_.group = group;
  event_.bytes = bytes;
  start_ns_ = now_ns();
}

ObservedCall::~ObservedCall() {
  if (observer_ == nullptr) return;
  const int64_t end = now_ns();
  event_.start_seconds = double(start_ns_) * 1e-9;
  event_.seconds = double(end - start_ns_) * 1e-9;
  observer_->api->on_event(observer_->instance, &event_);
}

}  // namespace mh
