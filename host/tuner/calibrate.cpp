#include "tuner/calibrate.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <memory>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/ops.hpp"
#include "tuner/calibration_ops.hpp"
#include "tuner/calibration_team.hpp"

namespace mh {
namespace {

// What a mode measures. Both cover 1, 2 and 4 ranks sharing the machine,
// all, half and one of them computing, every op the cost model prices and
// a decode step's few-row products; quick takes a grid twice as coarse,
// fewer rounds and passes, and no few-row products against weights beyond
// the last-level cache (their streaming bound is priced from the streaming
// rates, which both measure).
struct Grid {
  std::vector<int64_t> dims;             // m, n and k of single products
  double max_gemm_flops;                 // skips products that take long on one core
  std::vector<int64_t> batches, batched_rows, batched_inner;
  std::vector<int64_t> decode_rows;      // a decode step: one row per sequence
  std::vector<int64_t> decode_batches;   // ... in attention, products batched over groups
  std::vector<int64_t> vector_rows;      // calls of rows x 256 elements
  bool dram_gemm;                        // few-row products against weights beyond the LLC
  bool streaming_every_team;             // streaming rates at every sharing, not only all busy
  std::vector<int> group_sizes;
  std::vector<int64_t> message_elements;
  int passes, rounds;                    // interleaved passes over the grid, rounds per pass
  double pass_seconds;                   // what one pass's rounds of one rate fill
  int collective_rounds;
};

Grid grid(CalibrationMode mode) {
  if (mode == CalibrationMode::kQuick)
    return Grid{.dims = {64, 256, 1024},
                .max_gemm_flops = 3e8,
                .batches = {2, 16},
                .batched_rows = {64},
                .batched_inner = {32, 128},
                .decode_rows = {1, 4},
                .decode_batches = {2, 16},
                .vector_rows = {4, 256, 8192},
                .dram_gemm = false,
                .streaming_every_team = false,
                .group_sizes = {2, 4},
                .message_elements = {1 << 10, 1 << 14, 1 << 18},
                .passes = 2,
                .rounds = 3,
                .pass_seconds = 0.004,
                .collective_rounds = 3};
  return Grid{.dims = {32, 64, 128, 256, 512, 1024, 2048},
              .max_gemm_flops = 3e8,
              .batches = {2, 8, 32, 128},
              .batched_rows = {64, 128, 512},
              .batched_inner = {32, 128, 512},
              .decode_rows = {1, 4},
              .decode_batches = {2, 8, 32, 128},
              .vector_rows = {4, 64, 256, 2048, 8192},
              .dram_gemm = true,
              .streaming_every_team = true,
              .group_sizes = {2, 4, 8},
              .message_elements = {1 << 10, 1 << 14, 1 << 18, 1 << 21},
              .passes = 2,
              .rounds = 5,
              .pass_seconds = 0.01,
              .collective_rounds = 5};
}

constexpr int kSharing[] = {1, 2, 4};
constexpr int64_t kEmptyElements = 8;  // one float per rank of the largest group
constexpr double kFastestBusBandwidth = 1e18;  // bytes/s: a profile's busbw_gbs is at most 1e9
constexpr int kCollectivePasses = 3;
// The memory-bound ops measured streaming far beyond the last-level cache:
// read only, write only, read and write.
const char* const kStreamingOps[] = {"sum_squares", "elementwise", "bias_add"};
// Quick: read only (weights, the KV cache) and read-write.
const char* const kQuickStreamingOps[] = {"sum_squares", "bias_add"};
// A calibration whose reference product ran this much slower (or faster)
// at its end than at its start measured two different machines: other work
// started or stopped meanwhile. Twice is far beyond the drift of a quiet
// machine's turbo and caches (a few percent) and below the 3-25x swings a
// shared machine showed, so it refuses only what cannot describe one state.
constexpr double kDriftRefused = 2.0;
// ... and one where more than a quarter of the rates' passes still disagree
// after being measured again.
constexpr double kDisagreeingRefused = 0.25;

double now() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

using Buffers = std::shared_ptr<std::vector<Buffer>>;

// Buffers in the dtype the kernels compute in: a bf16 device's GEMMs take
// bf16 operands, and their rate is what a bf16 candidate is priced by.
Buffers buffers(Device& d, std::initializer_list<int64_t> sizes) {
  auto out = std::make_shared<std::vector<Buffer>>();
  for (int64_t n : sizes) out->emplace_back(d, MemCategory::kWorkspace, n, d.info().compute_dtype);
  for (auto& b : *out) ops::fill(d, b.ptr(), b.numel(), 0.5f);
  return out;
}

// batch products (m x k) @ (n x k)^T, as the engine's forward layers run
// them; the calls cycle through copies of the (n x k) operands that add up
// to `working_set` bytes, one copy when 0.
CalibrationTeam::Prepare gemm_call(int64_t batch, int64_t m, int64_t n, int64_t k, int64_t working_set = 0) {
  return [=](Device& d, int) -> std::function<void()> {
    const int32_t dtype = d.info().compute_dtype;
    const int64_t weight_bytes = batch * n * k * int64_t(dtype_size(dtype));
    const int64_t copies = std::max<int64_t>(1, (working_set + weight_bytes - 1) / weight_bytes);
    Buffers b = buffers(d, {batch * m * k, batch * m * n, copies * batch * n * k});
    auto next = std::make_shared<int64_t>(0);
    return [&d, b, next, batch, m, n, k, copies, dtype, weight_bytes] {
      void* weight = static_cast<char*>((*b)[2].data()) + *next * weight_bytes;
      *next = (*next + 1) % copies;
      ops::gemm(d, (*b)[0].t({batch, m, k}), view(weight, dtype, {batch, n, k}), (*b)[1].t({batch, m, n}), false,
                true, 0);
      d.synchronize();
    };
  };
}

// The bytes of weights each product is measured cycling through on each
// rank: four times a core's own cache. In the engine every product has
// weights of its own, which the ops since their last use have evicted from
// the core's cache; measured against one weight, warm, a decode step's
// one-row products ran at twice the engine's rate (a small model's decode
// step streams megabytes from the shared cache). The products of more rows
// are timed cold besides (CalibrationTeam::round_seconds): a prefill's
// 64-row products, warm, ran 1.3-1.45 times as fast as the engine's.
int64_t weights_working_set() { return 4 * core_cache_bytes(); }

// The profile's busy field: 0 when every rank computes.
int32_t busy_field(const CalibrationTeam& team) { return team.busy() == team.ranks() ? 0 : team.busy(); }

// One rate of the grid: how to time it and where its seconds per call go.
struct Rate {
  const CalibrationTeam* team;
  CalibrationTeam::Prepare prepare;
  std::function<void(double seconds)> store;
  bool cold;                   // CalibrationTeam::round_seconds's
  std::vector<double> passes;  // the median of each pass's rounds
};

// Every rate measured in interleaved passes (forward, then backward, ...),
// so that a burst of other work slows different rates' different passes
// rather than every round of a few; each rate's seconds are the median of
// its passes. A rate whose passes disagree is measured once more.
class Calibration {
 public:
  explicit Calibration(const Grid& g) : grid_(g) {}

  void add(const CalibrationTeam& team, CalibrationTeam::Prepare prepare, std::function<void(double)> store,
           bool cold = false) {
    rates_.push_back(Rate{&team, std::move(prepare), std::move(store), cold, {}});
  }

  // Returns the fraction of rates whose passes still disagree.
  double run() {
    for (int pass = 0; pass < grid_.passes; ++pass) {
      LOG(INFO) << "calibration pass " << pass + 1 << " of " << grid_.passes << " over " << rates_.size() << " rates";
      for (size_t i = 0; i < rates_.size(); ++i) measure(rates_[pass % 2 == 0 ? i : rates_.size() - 1 - i]);
    }
    size_t disagreeing = 0;
    for (Rate& r : rates_)
      if (!passes_agree(r.passes)) {
        measure(r);
        if (!passes_agree(r.passes)) ++disagreeing;
      }
    for (Rate& r : rates_) r.store(median_seconds(r.passes));
    return rates_.empty() ? 0.0 : double(disagreeing) / double(rates_.size());
  }

 private:
  void measure(Rate& r) {
    r.passes.push_back(median_seconds(r.team->round_seconds(r.prepare, grid_.rounds, grid_.pass_seconds, r.cold)));
  }

  const Grid& grid_;
  std::vector<Rate> rates_;
};

void add_gemms(Calibration& cal, const Grid& g, const CalibrationTeam& team, HardwareProfile& p) {
  // Cold (CalibrationTeam::round_seconds) but for a decode step's products,
  // between which the engine runs one-row ops only.
  auto add = [&](int64_t batch, int64_t m, int64_t n, int64_t k, bool cold = true) {
    cal.add(
        team, gemm_call(batch, m, n, k, weights_working_set()),
        [&p, &team, batch, m, n, k](double seconds) {
          p.gemm.push_back(
              MH_GemmRate{team.ranks(), busy_field(team), batch, m, n, k, 2.0 * double(batch * m * n * k) / seconds});
        },
        cold);
  };
  for (int64_t m : g.dims)
    for (int64_t n : g.dims)
      for (int64_t k : g.dims)
        if (2.0 * double(m * n * k) <= g.max_gemm_flops) add(1, m, n, k);
  for (int64_t batch : g.batches)
    for (int64_t m : g.batched_rows)
      for (int64_t n : g.batched_inner)
        for (int64_t k : g.batched_inner) add(batch, m, n, k);
  // A decode step's products stream their weights (or, in attention, the
  // cached keys and values) for a row or a few, far below the rate of the
  // shapes above.
  for (int64_t m : g.decode_rows) {
    for (int64_t n : g.dims)
      for (int64_t k : g.dims) add(1, m, n, k, false);
    for (int64_t batch : g.decode_batches)
      for (int64_t n : g.batched_inner)
        for (int64_t k : g.batched_inner) add(batch, m, n, k, false);
  }
  // ... and against weights twice the last-level cache, shared between the
  // ranks computing, as a large model's decode step reads them.
  if (g.dram_gemm && busy_field(team) == 0) {
    const int64_t elements = 2 * last_level_cache_bytes() / 4 / team.busy();
    const int64_t side = int64_t(std::sqrt(double(elements)));
    for (int64_t m : g.decode_rows) add(1, m, side, side, false);
  }
}

void add_vector_op(Calibration& cal, const CalibrationTeam& team, const VectorOp& op, HardwareProfile& p) {
  cal.add(team, op.prepare, [&p, &team, op](double seconds) {
    p.vector.push_back({op.name, team.ranks(), busy_field(team), op.elements, op.bytes_per_element,
                        double(op.elements) * op.bytes_per_element / seconds});
  });
}

void add_vectors(Calibration& cal, const Grid& g, const CalibrationTeam& team, HardwareProfile& p) {
  for (int64_t rows : g.vector_rows)
    for (const VectorOp& op : vector_ops(rows)) add_vector_op(cal, team, op, p);
  // Streaming far beyond the last-level cache: twice it between the ranks
  // computing, as a decode step streams a large model's weights (quick:
  // with every rank computing only; fewer busy ranks take those rates).
  if (g.streaming_every_team || busy_field(team) == 0) {
    const int64_t rows = 2 * last_level_cache_bytes() / 4 / 256 / team.busy();
    const std::span<const char* const> ops = g.streaming_every_team ? std::span<const char* const>(kStreamingOps)
                                                                    : std::span<const char* const>(kQuickStreamingOps);
    for (const VectorOp& op : vector_ops(rows))
      if (std::find(ops.begin(), ops.end(), op.name) != ops.end()) add_vector_op(cal, team, op, p);
  }
  const VectorOp call = call_chain();
  cal.add(team, call.prepare, [&p, &team, calls = call.elements](double seconds) {
    p.vector.push_back({"call", team.ranks(), busy_field(team), 1, 1.0, double(calls) / seconds});
  });
}

// What a rank computes between two of a decode step's messages, at least: a
// small model's step takes a few hundred microseconds over about ten.
constexpr double kWorkBetween = 50e-6;

// Spins for `seconds` of wall time, as a rank computing does.
void busy_for(double seconds) {
  const double until = now() + seconds;
  while (now() < until) {
  }
}

// Seconds of one collective of `elements` floats over the world group of
// the comm component (configured for `ranks` ranks): the median of rounds.
// Where the ranks fit the cores, each computes for kWorkBetween before each
// collective, as the engine's ranks do: the ranks arrive apart, the first
// waits asleep, and its wake-up is part of the collective. The engine's
// two-rank decode all-reduces took 64 us each; back to back, where ranks
// arrive together, the calibration measured 7-9 us in some runs and 45 in
// others. (Ranks outnumbering the cores stay back to back: there each
// collective waits for its ranks' turns on the cores, computing or not.)
double collective_seconds(const Slot& comm_slot, const std::string& op, int ranks, int64_t elements, int rounds) {
  Instance comm(comm_slot, 0, -1);
  const auto* api = comm.api<MH_CommApi>();
  // A round of 16, after 8 more that start the comm's and the threads'
  // first calls: the first collective of an instance measured 4 ms where
  // the rest took 10-30 us.
  constexpr int kReps = 16, kWarmUp = 8;
  const double work = ranks <= cores() ? kWorkBetween : 0;
  RoundClock clock(ranks, rounds);
  run_together(ranks, [&](int r) {
    MH_Group* world = nullptr;
    check(api->world(comm.get(), r, &world), "calibration: comm world group");
    Collectives group(api, world, "calibration", false);
    std::vector<float> send(size_t(elements), 1.f), recv(size_t(elements) * size_t(ranks), 0.f);
    const std::vector<int64_t> per_peer(size_t(ranks), elements / ranks);
    auto once = [&] {
      // In the ping-pong rank 0 computes before its message and rank 1
      // before its reply: as a pipeline's stages hand a decode step on, each
      // message's receiver has waited, asleep, while its partner computed.
      if (op != "send_recv" || r == 0) busy_for(work);
      if (op == "all_reduce") group.all_reduce(send.data(), elements);
      else if (op == "all_gather") group.all_gather(send.data(), recv.data(), elements / ranks);
      else if (op == "reduce_scatter") group.reduce_scatter(send.data(), recv.data(), elements / ranks);
      else if (op == "all_to_all") group.all_to_all(send.data(), per_peer, recv.data(), per_peer);
      else if (r == 0) {
        group.send(send.data(), elements, 1);
        group.recv(recv.data(), elements, 1);
      } else if (r == 1) {
        group.recv(recv.data(), elements, 0);
        busy_for(work);
        group.send(send.data(), elements, 0);
      }
    };
    for (int i = 0; i < kWarmUp; ++i) once();
    for (int round = 0; round < rounds; ++round) {
      group.barrier();
      clock.start(r, round);
      for (int i = 0; i < kReps; ++i) once();
      clock.stop(r, round);
    }
  });
  const double each = median_seconds(clock.rounds()) / kReps;
  if (op != "send_recv") return std::max(0.0, each - work);
  return std::max(0.0, each - 2 * work) / 2;
}

// The run's config with its comm component set to `ranks` ranks.
Assembly with_world(const Config& config, const Registry& registry, int ranks) {
  Config resized = config;
  toml::table comm = find_table(config.root(), "comm") ? *find_table(config.root(), "comm") : toml::table{};
  comm.insert_or_assign("world_size", ranks);
  resized.replace_section("comm", comm);
  Diagnostics diag;
  std::optional<Assembly> a = assemble(resized, registry, diag);
  require(a.has_value(), "calibration: " + diag.report());
  return std::move(*a);
}

// latency + bytes * f / busbw: the latency is the time of a near-empty
// collective, measured, since extrapolating it from large messages puts it
// within their noise (often below zero); the bandwidth is then fitted by
// least squares over the message sizes -- from a decode step's all-reduce
// of a few rows to a training step's -- with that latency held.
void measure_collectives(const Config& config, const Registry& registry, const Grid& g, HardwareProfile& p) {
  struct Timing {
    const Slot* comm;
    int ranks;
    std::string op;
    int64_t elements;
    std::vector<double> passes;
  };
  std::vector<Assembly> worlds;
  worlds.reserve(g.group_sizes.size());
  std::vector<Timing> timings;
  for (int ranks : g.group_sizes) {
    worlds.push_back(with_world(config, registry, ranks));
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "all_to_all", "send_recv"}) {
      if (std::string(op) == "send_recv" && ranks != 2) continue;
      timings.push_back({worlds.back().slot(MH_KIND_COMM), ranks, op, kEmptyElements, {}});
      for (int64_t elements : g.message_elements) timings.push_back({worlds.back().slot(MH_KIND_COMM), ranks, op, elements, {}});
    }
  }
  // Interleaved passes, as for the kernels: the first collectives of a
  // calibration measured 20 times the rest's latency in one pass.
  for (int pass = 0; pass < kCollectivePasses; ++pass)
    for (size_t i = 0; i < timings.size(); ++i) {
      Timing& t = timings[pass % 2 == 0 ? i : timings.size() - 1 - i];
      t.passes.push_back(collective_seconds(*t.comm, t.op, t.ranks, t.elements, g.collective_rounds));
    }
  for (size_t i = 0; i < timings.size();) {
    const Timing& empty = timings[i++];
    const double f = empty.op == "all_reduce" ? 2.0 * (empty.ranks - 1) / empty.ranks
                     : empty.op == "send_recv" ? 1.0
                                               : double(empty.ranks - 1) / empty.ranks;
    const double latency = median_seconds(empty.passes);
    std::vector<double> bus_bytes, seconds;
    for (size_t k = 0; k < g.message_elements.size(); ++k, ++i) {
      bus_bytes.push_back(double(timings[i].elements) * 4 * f);
      seconds.push_back(median_seconds(timings[i].passes));
    }
    // A fit at or below zero slope is as fast as measurable: the most a profile holds.
    const double busbw = std::min(fitted_bus_bandwidth(latency, bus_bytes, seconds), kFastestBusBandwidth);
    p.collectives.push_back({MH_LINK_INTRA_NODE, empty.ranks, empty.op, latency, busbw});
  }
}

// A 128 x 128 x 64 product on one rank alone, small enough that the kernels
// run it on one thread (a team's threads waiting for each other on a busy
// machine would make it a lottery): timed at the calibration's start and
// end, its drift says whether the machine stayed the same meanwhile.
double reference_seconds(const CalibrationTeam& alone) {
  return median_seconds(alone.round_seconds(gemm_call(1, 128, 128, 64), 7, 0.02));
}

}  // namespace

CalibrationMode calibration_mode(const std::string& word) {
  if (word == "full") return CalibrationMode::kFull;
  if (word == "quick") return CalibrationMode::kQuick;
  throw Error(MH_INVALID_ARGUMENT, "--calibrate: '" + word + "' is not a calibration; give --calibrate quick (about a minute) or "
              "--calibrate full (the default of a bare --calibrate)");
}

const char* calibration_mode_name(CalibrationMode mode) { return mode == CalibrationMode::kQuick ? "quick" : "full"; }

double fitted_bus_bandwidth(double latency, std::span<const double> bus_bytes, std::span<const double> seconds) {
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < bus_bytes.size(); ++i) {
    sxx += bus_bytes[i] * bus_bytes[i];
    sxy += bus_bytes[i] * (seconds[i] - latency);
  }
  return sxx / std::max(sxy, 1e-30 * sxx);  // a slope at or below zero: as fast as measurable
}

double median_seconds(std::vector<double> v) {
  require(!v.empty(), "calibration: a rate without measurements");
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
}

bool passes_agree(std::span<const double> pass_seconds) {
  std::vector<double> v(pass_seconds.begin(), pass_seconds.end());
  std::sort(v.begin(), v.end());
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] <= kPassesAgree * v[i - 1]) return true;
  return v.size() < 2;
}

HardwareProfile measure_this_machine(const Config& config, const Registry& registry, CalibrationMode mode) {
  const double start = now();
  Diagnostics diag;
  std::optional<Assembly> assembly = assemble(config, registry, diag);
  require(assembly.has_value(), diag.report());
  const Slot& kernels = *assembly->slot(MH_KIND_KERNELS);
  const Grid g = grid(mode);
  HardwareProfile p;
  {
    Instance one(kernels, 1, 0);
    Device d(one);
    p.name = "local_cpu";
    p.device = d.info().name;
    p.peak_flops = d.info().peak_flops;
    p.memory_bytes = d.info().memory_bytes;
    p.dtype = d.info().compute_dtype;  // the GEMM rates below are measured in it
  }
  p.calibrated = calibration_mode_name(mode);
  p.shared_device = true;
  p.devices_per_node = cores();
  std::vector<std::unique_ptr<CalibrationTeam>> teams;
  for (int sharing : kSharing)
    for (int busy = sharing; busy >= 1; busy /= 2) teams.push_back(std::make_unique<CalibrationTeam>(kernels, sharing, busy));
  const CalibrationTeam& alone = *teams.front();
  const double reference_before = reference_seconds(alone);
  Calibration cal(g);
  for (const auto& team : teams) {
    add_gemms(cal, g, *team, p);
    add_vectors(cal, g, *team, p);
  }
  const double disagreeing = cal.run();
  LOG(INFO) << "calibrating collectives of comm '" << assembly->slot(MH_KIND_COMM)->component->desc->name << "'";
  measure_collectives(config, registry, g, p);
  const double reference_after = reference_seconds(alone);
  const double drift = std::max(reference_after / reference_before, reference_before / reference_after);
  char figures[256];
  std::snprintf(figures, sizeof figures,
                "a 128 x 128 x 64 product took %.0f us at the start and %.0f us at the end (%.2fx); %.0f%% of the rates' "
                "passes disagreed by more than %.1fx after a second look",
                1e6 * reference_before, 1e6 * reference_after, drift, 100 * disagreeing, kPassesAgree);
  if (drift > kDriftRefused || disagreeing > kDisagreeingRefused)
    throw Error(MH_ABORTED, std::string("the ") + calibration_mode_name(mode) +
                " calibration disagrees with itself, so it describes no one state of this machine and no profile "
                "was written from it: " + figures +
                ". Other work started or stopped while it ran; calibrate again when the machine's load is steady");
  LOG(INFO) << calibration_mode_name(mode) << " calibration took " << std::lround(now() - start) << " s: " << figures;
  return p;
}

int calibrate(const Config& config, const Registry& registry, const std::string& out_file, CalibrationMode mode) {
  const HardwareProfile p = measure_this_machine(config, registry, mode);
  write_hardware_profile(p, out_file,
                         "# This machine, measured by `megahost --calibrate " + std::string(calibration_mode_name(mode)) +
                             "` through the kernels and comm components\n"
                             "# of the config it was given. Rates are per rank while `ranks` ranks share the machine,\n"
                             "# `busy` of them computing (all when absent); each the median of interleaved passes.\n\n");
  std::cout << "wrote " << out_file << ": " << p.gemm.size() << " GEMM shapes, " << p.vector.size() << " op rates, "
            << p.collectives.size() << " collective fits\n";
  return 0;
}

}  // namespace mh
