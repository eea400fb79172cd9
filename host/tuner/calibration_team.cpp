#include "tuner/calibration_team.hpp"

#include <algorithm>
#include <atomic>
#include <barrier>
#include <chrono>
#include <cmath>
#include <exception>
#include <initializer_list>
#include <mutex>
#include <thread>
#include <utility>

#include <unistd.h>

#include "engine/ops.hpp"
#include "tuner/calibrate.hpp"

namespace mh {
namespace {

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

// How long a rank with a team of threads calls before it is timed. The rank
// thread starts afresh for each measurement, and a fresh OpenMP team's
// threads were on one core at its first call in 11 of 12 trials on a 2-core
// Xeon, three times slower, until the scheduler moved one away within 0.1-0.2
// s; the engine's rank threads live for the whole run and are past that by
// their first timed step.
constexpr double kTeamWarmUpSeconds = 0.1;

// Calls of a cold timing's round, at most: each copies megabytes first, and
// a median of 16 calls is as steady as of the thousands a warm round of
// small calls makes.
constexpr int kColdCalls = 16;

// What a cold timing's rank copies before each call: its team's cores' own
// caches' worth, so that it reads and writes twice what they hold.
std::function<void()> evicting(Device& d, int threads) {
  const int64_t half = core_cache_bytes() * threads / int64_t(sizeof(float));
  auto buffer = std::make_shared<Buffer>(d, MemCategory::kWorkspace, 2 * half);
  ops::fill(d, buffer->ptr(), buffer->numel(), 1.0f);
  return [&d, buffer, half] {
    ops::copy(d, buffer->ptr(), {buffer->f32() + half, MH_F32}, half);
    d.synchronize();
  };
}

// Bytes of the first of these caches (sysconf names) the system gives a
// size for; `otherwise` when it gives none.
int64_t cache_bytes(std::initializer_list<int> names, int64_t otherwise) {
  for (int name : names)
    if (const long bytes = sysconf(name); bytes > 0) return bytes;
  return otherwise;
}

}  // namespace

int cores() { return int(std::max(1u, std::thread::hardware_concurrency())); }
int64_t core_cache_bytes() { return cache_bytes({_SC_LEVEL2_CACHE_SIZE}, int64_t{1} << 20); }
int64_t last_level_cache_bytes() {
  return cache_bytes({_SC_LEVEL3_CACHE_SIZE, _SC_LEVEL2_CACHE_SIZE}, int64_t{32} << 20);
}

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

CalibrationTeam::CalibrationTeam(const Slot& kernels, int ranks, int busy) : ranks_(ranks) {
  for (int r = 0; r < busy; ++r) {
    devices_.push_back(std::make_unique<RankDevice>(kernels, ranks, r));
  }
}

RoundClock::RoundClock(int ranks, int rounds)
    : start_(size_t(ranks) * size_t(rounds)), end_(size_t(ranks) * size_t(rounds)), rounds_(rounds) {}

void RoundClock::start(int rank, int round) { start_[index(rank, round)] = now(); }
void RoundClock::stop(int rank, int round) { end_[index(rank, round)] = now(); }

std::vector<double> RoundClock::rounds() const {
  std::vector<double> out;
  const size_t ranks = start_.size() / size_t(rounds_);
  for (int round = 0; round < rounds_; ++round) {
    double first = 1e300, last = -1e300;
    for (size_t r = 0; r < ranks; ++r) {
      first = std::min(first, start_[index(int(r), round)]);
      last = std::max(last, end_[index(int(r), round)]);
    }
    out.push_back(last - first);
  }
  return out;
}

int CalibrationTeam::threads() const { return std::max(devices_.front()->dev.info().threads, 1); }

bool CalibrationTeam::oversubscribed() const {
  return int64_t(busy()) * threads() > int64_t(cores());
}

std::vector<double> CalibrationTeam::round_seconds(const Prepare& prepare, int rounds, double min_seconds,
                                                   bool cold) const {
  const int n = busy();
  const bool evict = cold && !oversubscribed();
  std::barrier sync(n);
  std::atomic<int> reps{1};
  RoundClock clock(n, rounds);
  std::vector<std::vector<double>> calls(size_t(n) * size_t(rounds));  // [rank * rounds + round]
  const double warm_up = threads() > 1 ? kTeamWarmUpSeconds : 0;
  run_together(n, [&](int r) {
    Device& d = devices_[size_t(r)]->dev;
    std::function<void()> call = prepare(d, r);
    const std::function<void()> before = evict ? evicting(d, threads()) : [] {};
    sync.arrive_and_wait();
    double start = now(), last = 0;
    for (const double warm_until = start + warm_up; last == 0 || start < warm_until; start = now()) {
      call();
      last = now() - start;
    }
    if (r == 0) {
      const int fill = std::max(1, int(std::ceil(min_seconds / rounds / std::max(last, 1e-7))));
      reps = evict ? std::min(fill, kColdCalls) : fill;
    }
    for (int round = 0; round < rounds; ++round) {
      sync.arrive_and_wait();
      std::vector<double>& mine = calls[size_t(r) * size_t(rounds) + size_t(round)];
      clock.start(r, round);
      for (int i = 0, count = reps.load(); i < count; ++i) {
        before();
        const double called = now();
        call();
        mine.push_back(now() - called);
      }
      clock.stop(r, round);
    }
  });
  return round_figures(calls, clock.rounds(), reps.load(), oversubscribed());
}

std::vector<double> round_figures(const std::vector<std::vector<double>>& calls, const std::vector<double>& round_lengths,
                                  int reps, bool oversubscribed) {
  std::vector<double> out = round_lengths;
  if (oversubscribed) {
    for (double& seconds : out) seconds /= reps;
    return out;
  }
  const size_t rounds = round_lengths.size(), ranks = calls.size() / rounds;
  for (size_t round = 0; round < rounds; ++round) {
    std::vector<double> all;
    for (size_t r = 0; r < ranks; ++r) all.insert(all.end(), calls[r * rounds + round].begin(), calls[r * rounds + round].end());
    out[round] = median_seconds(std::move(all));
  }
  return out;
}

}  // namespace mh
