#include "machine.hpp"

#include <megahost/dtype.hpp>
#include <megahost/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mh::tuner {
namespace {

constexpr size_t kNeighbours = 4;


const char* op_name(Coll op) {
  switch (op) {
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kAllGather: return "all_gather";
    case Coll::kReduceScatter: return "reduce_scatter";
    case Coll::kAllToAll: return "all_to_all";
    default: return "send_recv";
  }
}

template <class T>
std::vector<T> distinct_sorted(std::vector<T> v) {
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

}  // namespace

double ring_factor(Coll op, int ranks) {
  const double n = ranks;
  switch (op) {
    case Coll::kAllReduce: return 2 * (n - 1) / n;
    case Coll::kSendRecv: return 1;
    default: return (n - 1) / n;
  }
}

Machine::Machine(const MH_Hardware& hw)
    : name_(hw.name != nullptr ? hw.name : "?"),
      peak_flops_(hw.peak_flops),
      memory_bytes_(hw.memory_bytes),
      element_bytes_(double(dtype_size(hw.dtype))),
      shared_(hw.shared_device != 0) {
  // busy = 0: every rank computed.
  auto level = [](int32_t ranks, int32_t busy) { return Level{ranks, busy > 0 ? busy : ranks}; };
  std::vector<Level> gl, vl;
  for (size_t i = 0; i < hw.num_gemm; ++i) {
    const MH_GemmRate& g = hw.gemm[i];
    gemm_.push_back({level(g.ranks, g.busy),
                     {std::log2(double(g.batch)), std::log2(double(g.m)), std::log2(double(g.n)), std::log2(double(g.k))},
                     std::log(g.flops_per_s)});
    gl.push_back(gemm_.back().level);
  }
  for (size_t i = 0; i < hw.num_vector; ++i) {
    const MH_VectorRate& v = hw.vector[i];
    vector_.push_back({v.op, level(v.ranks, v.busy), v.elements > 0 ? std::log(double(v.elements)) : -1.0, v.bytes_per_element,
                       v.bytes_per_element / v.bytes_per_s});
    vl.push_back(vector_.back().level);
    has_call_ = has_call_ || vector_.back().op == "call";
  }
  for (size_t i = 0; i < hw.num_collectives; ++i) {
    const MH_CollectiveRate& c = hw.collectives[i];
    collectives_.push_back({c.level, c.ranks, c.op, c.latency_s, c.bus_bytes_per_s});
  }
  gemm_levels_ = distinct_sorted(gl);
  vector_levels_ = distinct_sorted(vl);
  require(!gemm_levels_.empty(), "hardware profile '" + name_ + "' has no [[gemm]] rates");
  require(!vector_levels_.empty(), "hardware profile '" + name_ + "' has no [[vector]] rates");
}

double Machine::at_sharing(const std::vector<Level>& measured, Sharing sharing,
                           const std::function<double(Level)>& seconds) const {
  int32_t ranks = measured.front().ranks;
  for (const Level& l : measured)
    if (l.ranks <= sharing.ranks) ranks = l.ranks;
  std::vector<int32_t> busy;
  for (const Level& l : measured)
    if (l.ranks == ranks) busy.push_back(l.busy);
  // Past the most busy ranks measured, ranks share the device by time slicing.
  if (sharing.busy >= busy.back()) {
    const double factor = shared_ ? double(sharing.busy) / double(busy.back()) : 1.0;
    return seconds({ranks, busy.back()}) * factor;
  }
  const auto hi = std::lower_bound(busy.begin(), busy.end(), sharing.busy);
  if (*hi == sharing.busy || hi == busy.begin()) return seconds({ranks, *hi});
  const int32_t lo = *std::prev(hi);
  const double f = double(sharing.busy - lo) / double(*hi - lo);
  return (1 - f) * seconds({ranks, lo}) + f * seconds({ranks, *hi});
}

double Machine::gemm_rate(const double coords[4], Level level) const {
  std::vector<std::pair<double, double>> near;  // (squared distance, log rate)
  for (const auto& g : gemm_) {
    if (g.level != level) continue;
    double d2 = 0;
    for (int i = 0; i < 4; ++i) d2 += (g.coords[i] - coords[i]) * (g.coords[i] - coords[i]);
    near.emplace_back(d2, g.log_rate);
  }
  const size_t k = std::min(kNeighbours, near.size());
  std::partial_sort(near.begin(), near.begin() + k, near.end());
  if (near.front().first < 1e-12) return std::exp(near.front().second);
  // Inverse-distance weighting of the log rate over the nearest shapes.
  double weights = 0, sum = 0;
  for (size_t i = 0; i < k; ++i) {
    weights += 1 / near[i].first;
    sum += near[i].second / near[i].first;
  }
  return std::exp(sum / weights);
}

double Machine::seconds_per_element(std::string_view op, Level level, double elements) const {
  std::vector<const Vector*> rows;
  for (const auto& v : vector_)
    if (v.level == level && v.op == op) rows.push_back(&v);
  require(!rows.empty(), "hardware profile '" + name_ + "' has no [[vector]] rate for op '" + std::string(op) +
                             "' at ranks = " + std::to_string(level.ranks) + ", busy = " + std::to_string(level.busy) +
                             "; add one (docs/tuner.md lists the ops the cost model prices)");
  std::sort(rows.begin(), rows.end(), [](const Vector* a, const Vector* b) { return a->log_elements < b->log_elements; });
  const double x = std::log(std::max(elements, 1.0));
  if (rows.front()->log_elements < 0 || x <= rows.front()->log_elements) return rows.front()->seconds_per_element;
  for (size_t i = 1; i < rows.size(); ++i) {
    const Vector &lo = *rows[i - 1], &hi = *rows[i];
    if (x > hi.log_elements) continue;
    const double f = (x - lo.log_elements) / (hi.log_elements - lo.log_elements);
    return std::exp((1 - f) * std::log(lo.seconds_per_element) + f * std::log(hi.seconds_per_element));
  }
  return rows.back()->seconds_per_element;
}

double Machine::stream_seconds(double bytes, Sharing sharing) const {
  return at_sharing(vector_levels_, sharing, [&](Level level) {
    double bytes_per_element = 0;
    for (const auto& v : vector_)
      if (v.op == "elementwise" && v.level == level) bytes_per_element = v.bytes_per_element;
    require(bytes_per_element > 0, "hardware profile '" + name_ +
                                       "' has no [[vector]] rate for op 'elementwise', the streaming bound of GEMMs");
    const double elements = bytes / bytes_per_element;
    return elements * seconds_per_element("elementwise", level, elements);
  });
}

double Machine::bandwidth_seconds(double bytes, Sharing sharing) const {
  if (bytes <= 0) return 0;
  return at_sharing(vector_levels_, sharing, [&](Level level) {
    double best = 0, largest = -1, at_largest = 0;  // bytes/s
    for (const auto& v : vector_) {
      if (v.level != level || (v.op != "sum_squares" && v.op != "elementwise" && v.op != "bias_add")) continue;
      const double rate = v.bytes_per_element / v.seconds_per_element;
      const double call_bytes = v.log_elements < 0 ? -1 : std::exp(v.log_elements) * v.bytes_per_element;
      if (v.log_elements < 0 || call_bytes >= bytes) best = std::max(best, rate);
      if (call_bytes > largest || (call_bytes == largest && rate > at_largest)) largest = call_bytes, at_largest = rate;
    }
    require(best > 0 || at_largest > 0, "hardware profile '" + name_ +
                                            "' has no [[vector]] rate for op 'elementwise', the streaming bound of GEMMs");
    return bytes / (best > 0 ? best : at_largest);
  });
}

double Machine::working_set_seconds(double bytes, double working_set, Sharing sharing) const {
  if (bytes <= 0) return 0;
  return at_sharing(vector_levels_, sharing, [&](Level level) {
    std::vector<std::pair<double, double>> reads;  // (log call bytes, log bytes/s)
    for (const auto& v : vector_)
      if (v.level == level && v.op == "sum_squares" && v.log_elements >= 0)
        reads.emplace_back(v.log_elements + std::log(v.bytes_per_element), std::log(v.bytes_per_element / v.seconds_per_element));
    std::sort(reads.begin(), reads.end());
    const double x = std::log(std::max(working_set, 1.0));
    if (reads.size() < 2 || x <= reads[reads.size() - 2].first) return 0.0;
    const auto& [x0, r0] = reads[reads.size() - 2];
    const auto& [x1, r1] = reads.back();
    const double f = std::min(1.0, (x - x0) / (x1 - x0));
    return bytes / std::exp((1 - f) * r0 + f * r1);
  });
}

double Machine::call_seconds(Sharing sharing) const {
  if (!has_call_) return 0;
  return at_sharing(vector_levels_, sharing, [&](Level level) { return seconds_per_element("call", level, 1); });
}

double Machine::gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, Sharing sharing) const {
  if (batch == 0 || m == 0 || n == 0 || k == 0) return 0;
  const double coords[4] = {std::log2(double(batch)), std::log2(double(m)), std::log2(double(n)),
                            std::log2(double(k))};
  const double flops = 2.0 * double(batch) * double(m) * double(n) * double(k);
  const double compute = at_sharing(gemm_levels_, sharing, [&](Level l) { return flops / gemm_rate(coords, l); });
  const double operands = element_bytes_ * double(batch) * double(m * k + k * n + m * n);
  return std::max(compute, bandwidth_seconds(operands, sharing));
}

double Machine::vector_seconds(std::string_view op, double elements, Sharing sharing) const {
  return at_sharing(vector_levels_, sharing,
                    [&](Level l) { return elements * seconds_per_element(op, l, elements); });
}

const Machine::Collective* Machine::collective_rate(Coll op, int ranks, int level) const {
  const Collective* best = nullptr;
  double best_score = std::numeric_limits<double>::infinity();
  for (const auto& c : collectives_) {
    if (c.level != level || (c.op != op_name(op) && c.op != "any")) continue;
    // Prefer the exact op, then the group size nearest in log scale.
    double score = (c.op == "any" ? 100.0 : 0.0) +
                   (c.ranks == 0 ? 50.0 : std::abs(std::log2(double(c.ranks) / double(ranks))));
    if (score < best_score) best_score = score, best = &c;
  }
  return best;
}

double Machine::collective_seconds(Coll op, double bytes, int ranks, int level) const {
  if (ranks <= 1 || bytes <= 0) return 0;
  const Collective* best = collective_rate(op, ranks, level);
  // A profile without an all-to-all rate (the published GPU ones, whose
  // sources give none) prices it as the point-to-point traffic it is: the
  // (r - 1) / r of the rank's tensor that leaves it, at send_recv's rate.
  if (best == nullptr && op == Coll::kAllToAll)
    return collective_seconds(Coll::kSendRecv, bytes * ring_factor(op, ranks), ranks, level);
  require(best != nullptr, "hardware profile '" + name_ + "' has no [[collective]] rate for " + op_name(op) +
                               (level == MH_LINK_INTER_NODE ? " between nodes" : " inside a node") +
                               "; it cannot describe this layout");
  return best->latency + bytes * ring_factor(op, ranks) / best->bus_bandwidth;
}

}  // namespace mh::tuner
