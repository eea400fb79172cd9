// Ranks measured at once: one kernels instance per rank, created on the
// main thread, each driven by its own thread while the clock runs, so a
// rate is what one rank sees while `size` ranks share the machine.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "assembly.hpp"
#include "engine/device.hpp"

namespace mh {

class CalibrationTeam {
 public:
  // A call to time, prepared (buffers allocated) on its rank's device.
  using Prepare = std::function<std::function<void()>(Device& device, int rank)>;

  CalibrationTeam(const Slot& kernels, int size);
  int size() const { return int(devices_.size()); }
  // Seconds per call with every rank calling at once: a warm-up call, then
  // the fastest of seven rounds that together fill about min_seconds.
  double seconds_per_call(const Prepare& prepare, double min_seconds = 0.05) const;

 private:
  std::vector<std::unique_ptr<Instance>> kernels_;
  std::vector<std::unique_ptr<Device>> devices_;
};

// Runs body(rank) on `size` threads at once and waits for them.
void run_together(int size, const std::function<void(int rank)>& body);

}  // namespace mh
