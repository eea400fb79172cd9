// Which rank threads have returned. Once one rank fails, its peers return
// within milliseconds (the communicator is aborted), but a rank stuck inside
// a plugin call never does; joining it would hang the process silently with
// the failure unreported. The host waits a grace period for it instead.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <vector>

namespace mh {

class RankExits {
 public:
  RankExits(int32_t first_rank, int32_t count) : first_rank_(first_rank), returned_(size_t(count), false) {}

  // Called by local rank `local` as its thread ends.
  void returned(int32_t local, bool failed);

  // Waits until every rank returned or, after one failed, `grace` longer,
  // or until `stalled()` (asked every `grace` / 4, at most every second)
  // says the run cannot go on. Returns the global ranks still running:
  // empty when all returned.
  std::vector<int32_t> wait(std::chrono::duration<double> grace, const std::function<bool()>& stalled);

 private:
  int32_t first_rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<bool> returned_;
  bool failed_ = false;
};

}  // namespace mh
