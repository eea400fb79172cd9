#include "tuner/calibrate.hpp"

#include <megahost/error.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <memory>
#include <thread>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/ops.hpp"
#include "tuner/calibration_ops.hpp"
#include "tuner/calibration_team.hpp"
#include "tuner/hardware_profile.hpp"

namespace mh {
namespace {

constexpr int kSharing[] = {1, 2, 4};
constexpr int64_t kDims[] = {32, 64, 128, 256, 512, 1024, 2048};
constexpr double kMaxGemmFlops = 1.1e9;  // skips products that take a second on one core
constexpr int64_t kBatches[] = {2, 8, 32, 128};
constexpr int64_t kBatchedRows[] = {128, 512};
constexpr int64_t kBatchedInner[] = {32, 128, 512};
// A decode step's rows: one per sequence of the batch. Its products stream
// their weights (or, in attention, the cached keys and values) for a row or
// a few, far below the rate of the shapes above.
constexpr int64_t kDecodeRows[] = {1, 4};
constexpr int64_t kVectorRows[] = {64, 256, 2048, 8192};  // 16K to 2M elements per call
constexpr int kGroupSizes[] = {2, 4, 8};
constexpr int64_t kEmptyElements = 8;  // one float per rank of the largest group
constexpr int64_t kMessageElements[] = {1 << 14, 1 << 18, 1 << 21};

using Buffers = std::shared_ptr<std::vector<Buffer>>;

// Buffers in the dtype the kernels compute in: a bf16 device's GEMMs take
// bf16 operands, and their rate is what a bf16 candidate is priced by.
Buffers buffers(Device& d, std::initializer_list<int64_t> sizes) {
  auto out = std::make_shared<std::vector<Buffer>>();
  for (int64_t n : sizes) out->emplace_back(d, MemCategory::kWorkspace, n, d.info().compute_dtype);
  for (auto& b : *out) ops::fill(d, b.ptr(), b.numel(), 0.5f);
  return out;
}

// batch products (m x k) @ (n x k)^T, as the engine's forward layers run them.
double gemm_flops(const CalibrationTeam& team, int64_t batch, int64_t m, int64_t n, int64_t k) {
  const double seconds = team.seconds_per_call([&](Device& d, int) -> std::function<void()> {
    Buffers b = buffers(d, {batch * m * k, batch * n * k, batch * m * n});
    return [&d, b, batch, m, n, k] {
      ops::gemm(d, (*b)[0].t({batch, m, k}), (*b)[1].t({batch, n, k}), (*b)[2].t({batch, m, n}), false, true, 0);
      d.synchronize();
    };
  });
  return 2.0 * double(batch * m * n * k) / seconds;
}

// The profile's busy field: 0 when every rank computes.
int32_t busy_field(const CalibrationTeam& team) { return team.busy() == team.ranks() ? 0 : team.busy(); }

void measure_gemm(const CalibrationTeam& team, HardwareProfile& p) {
  auto add = [&](int64_t batch, int64_t m, int64_t n, int64_t k) {
    p.gemm.push_back(MH_GemmRate{team.ranks(), busy_field(team), batch, m, n, k, gemm_flops(team, batch, m, n, k)});
  };
  for (int64_t m : kDims)
    for (int64_t n : kDims)
      for (int64_t k : kDims)
        if (2.0 * double(m * n * k) <= kMaxGemmFlops) add(1, m, n, k);
  for (int64_t batch : kBatches)
    for (int64_t m : kBatchedRows)
      for (int64_t n : kBatchedInner)
        for (int64_t k : kBatchedInner) add(batch, m, n, k);
  for (int64_t m : kDecodeRows) {
    for (int64_t n : kDims)
      for (int64_t k : kDims) add(1, m, n, k);
    for (int64_t batch : kBatches)
      for (int64_t n : kBatchedInner)
        for (int64_t k : kBatchedInner) add(batch, m, n, k);
  }
}

void measure_vector(const CalibrationTeam& team, HardwareProfile& p) {
  for (int64_t rows : kVectorRows)
    for (const VectorOp& op : vector_ops(rows)) {
      const double seconds = team.seconds_per_call(op.prepare);
      p.vector.push_back(
          {op.name, team.ranks(), busy_field(team), op.elements, op.bytes_per_element, double(op.elements) * op.bytes_per_element / seconds});
    }
}

// Seconds of one collective of `elements` floats over the world group of
// the comm component (configured for `ranks` ranks).
double collective_seconds(const Slot& comm_slot, const std::string& op, int ranks, int64_t elements) {
  Instance comm(comm_slot, 0, -1);
  const auto* api = comm.api<MH_CommApi>();
  constexpr int kRounds = 5, kReps = 4;
  RoundClock clock(ranks, kRounds);
  run_together(ranks, [&](int r) {
    MH_Group* world = nullptr;
    check(api->world(comm.get(), r, &world), "calibration: comm world group");
    Collectives group(api, world, "calibration", false);
    std::vector<float> send(size_t(elements), 1.f), recv(size_t(elements) * size_t(ranks), 0.f);
    auto once = [&] {
      if (op == "all_reduce") group.all_reduce(send.data(), elements);
      else if (op == "all_gather") group.all_gather(send.data(), recv.data(), elements / ranks);
      else if (op == "reduce_scatter") group.reduce_scatter(send.data(), recv.data(), elements / ranks);
      else if (r == 0) group.send(send.data(), elements, 1);
      else if (r == 1) group.recv(recv.data(), elements, 0);
    };
    once();
    // The fastest of a few rounds, as for the kernels.
    for (int round = 0; round < kRounds; ++round) {
      group.barrier();
      clock.start(r, round);
      for (int i = 0; i < kReps; ++i) once();
      clock.stop(r, round);
    }
  });
  return clock.fastest_round() / kReps;
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
// least squares over the message sizes with that latency held.
void measure_collectives(const Config& config, const Registry& registry, HardwareProfile& p) {
  for (int ranks : kGroupSizes) {
    const Assembly a = with_world(config, registry, ranks);
    const Slot& comm_slot = *a.slot(MH_KIND_COMM);
    for (const char* op : {"all_reduce", "all_gather", "reduce_scatter", "send_recv"}) {
      if (std::string(op) == "send_recv" && ranks != 2) continue;
      const double f = std::string(op) == "all_reduce" ? 2.0 * (ranks - 1) / ranks
                       : std::string(op) == "send_recv" ? 1.0
                                                        : double(ranks - 1) / ranks;
      const double latency = collective_seconds(comm_slot, op, ranks, kEmptyElements);
      std::vector<double> bus_bytes, seconds;
      for (int64_t elements : kMessageElements) {
        bus_bytes.push_back(double(elements) * 4 * f);
        seconds.push_back(collective_seconds(comm_slot, op, ranks, elements));
      }
      p.collectives.push_back({MH_LINK_INTRA_NODE, ranks, op, latency, fitted_bus_bandwidth(latency, bus_bytes, seconds)});
    }
  }
}

}  // namespace

double fitted_bus_bandwidth(double latency, std::span<const double> bus_bytes, std::span<const double> seconds) {
  double sxx = 0, sxy = 0;
  for (size_t i = 0; i < bus_bytes.size(); ++i) {
    sxx += bus_bytes[i] * bus_bytes[i];
    sxy += bus_bytes[i] * (seconds[i] - latency);
  }
  return sxx / std::max(sxy, 1e-30 * sxx);  // a slope at or below zero: as fast as measurable
}

int calibrate(const Config& config, const Registry& registry, const std::string& out_file) {
  Diagnostics diag;
  std::optional<Assembly> assembly = assemble(config, registry, diag);
  require(assembly.has_value(), diag.report());
  const Slot& kernels = *assembly->slot(MH_KIND_KERNELS);
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
  p.shared_device = true;
  p.devices_per_node = int32_t(std::max(1u, std::thread::hardware_concurrency()));
  for (int sharing : kSharing)
    for (int busy = sharing; busy >= 1; busy /= 2) {
      LOG(INFO) << "calibrating kernels with " << busy << " of " << sharing << " rank(s) computing";
      CalibrationTeam team(kernels, sharing, busy);
      measure_gemm(team, p);
      measure_vector(team, p);
    }
  LOG(INFO) << "calibrating collectives of comm '" << assembly->slot(MH_KIND_COMM)->component->desc->name << "'";
  measure_collectives(config, registry, p);
  write_hardware_profile(p, out_file,
                         "# This machine, measured by `megahost --calibrate` through the kernels and comm components\n"
                         "# of the config it was given. Rates are per rank while `ranks` ranks share the machine,\n"
                         "# `busy` of them computing (all when absent).\n\n");
  std::cout << "wrote " << out_file << ": " << p.gemm.size() << " GEMM shapes, " << p.vector.size() << " op rates, "
            << p.collectives.size() << " collective fits\n";
  return 0;
}

}  // namespace mh
