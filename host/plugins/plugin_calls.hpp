// Which plugin call each rank thread of this process is inside, and since
// when. A call that never returns (a hung kernel or device) is otherwise
// noticed only by peers timing out in a collective; with no peer left to
// wait for it (a run of one rank, or every rank stuck at once) the run would
// hang with nothing said.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

namespace mh {

class PluginCalls {
 public:
  PluginCalls(int32_t first_rank, int32_t ranks);

  // Makes the calling thread local rank `local`: its ScopedPluginCalls are
  // recorded here until the thread ends or another table is attached.
  void attach_this_thread(int32_t local);

  struct Stuck {
    int32_t rank;      // global
    const char* what;  // the kernels call
  };
  // The first rank inside one call for longer than `limit`; none when none.
  std::optional<Stuck> longer_than(std::chrono::duration<double> limit) const;

  struct Slot {
    std::atomic<int64_t> since_ns{0};  // steady clock; 0 outside any call
    std::atomic<const char*> what{nullptr};
  };

 private:
  int32_t first_rank_, ranks_;
  std::unique_ptr<Slot[]> slots_;
};

// Marks the calling thread's rank as inside the kernels call `what` (a
// string that outlives the call) for the object's lifetime. A thread with no
// table attached (a test, the calibration) records nothing.
class ScopedPluginCall {
 public:
  explicit ScopedPluginCall(const char* what);
  ~ScopedPluginCall();
  ScopedPluginCall(const ScopedPluginCall&) = delete;
  ScopedPluginCall& operator=(const ScopedPluginCall&) = delete;

 private:
  PluginCalls::Slot* slot_ = nullptr;  // set only for the outermost call
};

}  // namespace mh
