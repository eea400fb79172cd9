#include "tuner/calibration_team.hpp"

#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <exception>
#include <mutex>
#include <thread>

namespace mh {
namespace {

constexpr int kRounds = 7;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

}  // namespace

void run_together(int size, const std::function<void(int rank)>& body) {
  std::vector<std::thread> threads;
  std::exception_ptr failure;
  std::mutex mu;
  for (int r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      try {
        body(r);
      } catch (...) {
        std::lock_guard lock(mu);
        if (!failure) failure = std::current_exception();
      }
    });
  for (auto& t : threads) t.join();
  if (failure) std::rethrow_exception(failure);
}

CalibrationTeam::CalibrationTeam(const Slot& kernels, int size) {
  for (int r = 0; r < size; ++r) {
    kernels_.push_back(std::make_unique<Instance>(kernels, size, r));
    devices_.push_back(std::make_unique<Device>(*kernels_.back()));
  }
}

double CalibrationTeam::seconds_per_call(const Prepare& prepare, double min_seconds) const {
  const int n = size();
  std::barrier sync(n);
  std::atomic<int> reps{1};
  double best = 1e30;
  run_together(n, [&](int r) {
    std::function<void()> call = prepare(*devices_[size_t(r)], r);
    sync.arrive_and_wait();
    const double start = now();
    call();
    if (r == 0) reps = std::max(1, int(std::ceil(min_seconds / kRounds / std::max(now() - start, 1e-7))));
    // A round lasts until the slowest rank is done, so the time per call is
    // what each rank gets of the shared machine; the fastest round counts,
    // since other work on the machine only ever slows a round down.
    for (int round = 0; round < kRounds; ++round) {
      sync.arrive_and_wait();
      const double begin = now();
      for (int i = 0, count = reps.load(); i < count; ++i) call();
      sync.arrive_and_wait();
      if (r == 0) best = std::min(best, (now() - begin) / reps.load());
    }
  });
  return best;
}

}  // namespace mh
