// Observation (ABI 1.5): the rank's observer instance, if the run has an
// [observer] section, receives an MH_Event for each kernels call and
// collective the rank issues. The rank thread attaches its instance once;
// the engine's Device and Collectives wrap each call in an ObservedCall, so
// no op signature carries the observer.
#pragma once

#include <megahost/abi.h>

#include <cstdint>
#include <memory>

#include "plugins/assembly.hpp"

namespace mh {

struct ObserverAttachment {
  const MH_ObserverApi* api;
  MH_Instance* instance;
  int32_t rank;
};

// The observer of one rank: created from the assembly's observer slot (none
// without one) and attached to the calling thread for its lifetime.
class RankObserver {
 public:
  RankObserver(const Assembly& assembly, int32_t ranks_in_process, int32_t rank);
  ~RankObserver();
  RankObserver(const RankObserver&) = delete;
  RankObserver& operator=(const RankObserver&) = delete;

 private:
  std::unique_ptr<Instance> instance_;
  ObserverAttachment attached_{};
  const ObserverAttachment* previous_;  // the thread's attachment before this one (nested contexts)
};

// Times one call and hands it to the thread's observer when it ends; costs
// one thread-local read when the thread has none.
class ObservedCall {
 public:
  ObservedCall(MH_EventType type, const char* name, const char* group, uint64_t bytes);
  ~ObservedCall();
  ObservedCall(const ObservedCall&) = delete;
  ObservedCall& operator=(const ObservedCall&) = delete;

 private:
  const ObserverAttachment* observer_;
  MH_Event event_{};
  int64_t start_ns_ = 0;
};

}  // namespace mh
