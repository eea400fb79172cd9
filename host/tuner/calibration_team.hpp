// Ranks measured at once: one kernels instance per rank, created on the
// main thread, each driven by its own thread while the clock runs, so a
// rate is what one rank sees while `busy` of `ranks` ranks compute on the
// machine (the others idle, as pipeline stages do while it fills).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "plugins/assembly.hpp"
#include "engine/rank_context.hpp"

namespace mh {

class CalibrationTeam {
 public:
  // A call to time, prepared (buffers allocated) on its rank's device.
  using Prepare = std::function<std::function<void()>(Device& device, int rank)>;

  // Kernels instances configured as `ranks` ranks of a process (they size
  // their thread teams by it), `busy` of them created and timed.
  CalibrationTeam(const Slot& kernels, int ranks, int busy);
  int ranks() const { return ranks_; }
  int busy() const { return int(devices_.size()); }
  // Threads of each rank's team.
  int threads() const;
  // Whether the busy ranks' thread teams outnumber this machine's cores.
  bool oversubscribed() const;
  // Seconds per call in each of `rounds` rounds with every busy rank calling
  // at once, after a warm-up (one call; for a team of threads, calls for
  // kTeamWarmUpSeconds of the .cpp); the rounds together fill about
  // min_seconds (a call slower than that is one round's only call). A
  // round's figure is the median of its calls over the busy ranks: a call
  // that another process preempted (a thread of the team descheduled, the
  // others waiting for it) says nothing of the machine, and on 2 cores one
  // in a few calls was several times slower. Where the busy ranks' threads
  // outnumber the cores, time slicing between them is the cost measured, so
  // a round's figure is its length over its calls.
  //
  // `cold`: before each timed call each busy rank's team copies, untimed, its
  // cores' own caches' worth (reading and writing twice what they hold), as
  // the ops the engine runs between two products evict what the first left
  // there (its activations, its packed blocks). Where the threads outnumber
  // the cores, the ranks' time slices on a core do that already, and the
  // copy would sit in the round.
  std::vector<double> round_seconds(const Prepare& prepare, int rounds, double min_seconds, bool cold = false) const;

 private:
  int ranks_;
  std::vector<std::unique_ptr<RankDevice>> devices_;
};

// round_seconds's figures from what it timed: `calls[rank * rounds +
// round]`, each busy rank's calls of each round, and `round_lengths`, each
// round's length over `reps` calls per rank.
std::vector<double> round_figures(const std::vector<std::vector<double>>& calls, const std::vector<double>& round_lengths,
                                  int reps, bool oversubscribed);

// When each rank began and ended each round of a timing. A round lasts from
// the first rank's start to the last rank's end: on a machine with fewer
// cores than ranks, a rank may only start once others are done, and one
// rank's clock alone would then time part of the round (the fastest rounds
// being those where it started last).
class RoundClock {
 public:
  RoundClock(int ranks, int rounds);
  // Each (rank, round) is written by its rank's thread only.
  void start(int rank, int round);
  void stop(int rank, int round);
  // After every rank's thread is joined: each round's length.
  std::vector<double> rounds() const;

 private:
  size_t index(int rank, int round) const { return size_t(rank) * size_t(rounds_) + size_t(round); }
  std::vector<double> start_, end_;
  int rounds_;
};

// This machine: its cores, the bytes of a core's own cache (L2; 1 MiB when
// the system does not say) and of its last-level cache (L3, else L2; 32 MiB
// when the system says neither).
int cores();
int64_t core_cache_bytes();
int64_t last_level_cache_bytes();

// Runs body(rank) on `size` threads at once and waits for them.
void run_together(int size, const std::function<void(int rank)>& body);

}  // namespace mh
