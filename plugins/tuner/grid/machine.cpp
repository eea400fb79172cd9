#include "machine.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <cmath>
#include <limits>

namespace mh::tuner {
namespace {

constexpr size_t kNeighbours = 4;

double element_size(int32_t dtype) { return dtype == MH_BF16 || dtype == MH_F16 ? 2.0 : 4.0; }

const char* op_name(Coll op) {
  switch (op) {
    case Coll::kAllReduce: return "all_reduce";
    case Coll::kAllGather: return "all_gather";
    case Coll::kReduceScatter: return "reduce_scatter";
    default: return "send_recv";
  }
}

std::vector<int32_t> distinct_sorted(std::vector<int32_t> v) {
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
      element_bytes_(element_size(hw.dtype)),
      devices_per_node_(hw.devices_per_node),
      shared_(hw.shared_device != 0) {
  std::vector<int32_t> gl, vl;
  for (size_t i = 0; i < hw.num_gemm; ++i) {
    const MH_GemmRate& g = hw.gemm[i];
    gemm_.push_back({g.ranks,
                     {std::log2(double(g.batch)), std::log2(double(g.m)), std::log2(double(g.n)), std::log2(double(g.k))},
                     std::log(g.flops_per_s)});
    gl.push_back(g.ranks);
  }
  for (size_t i = 0; i < hw.num_vector; ++i) {
    const MH_VectorRate& v = hw.vector[i];
    vector_.push_back({v.op, v.ranks, v.elements > 0 ? std::log(double(v.elements)) : -1.0, v.bytes_per_element,
                       v.bytes_per_element / v.bytes_per_s});
    vl.push_back(v.ranks);
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

std::pair<int32_t, double> Machine::level_for(const std::vector<int32_t>& measured, int sharing) const {
  int32_t level = measured.front();
  for (int32_t m : measured)
    if (m <= sharing) level = m;
  // Past the most ranks measured, ranks share the device by time slicing.
  const double factor = shared_ && sharing > level ? double(sharing) / double(level) : 1.0;
  return {level, factor};
}

double Machine::gemm_rate(const double coords[4], int32_t ranks) const {
  std::vector<std::pair<double, double>> near;  // (squared distance, log rate)
  for (const auto& g : gemm_) {
    if (g.ranks != ranks) continue;
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

double Machine::seconds_per_element(std::string_view op, int32_t level, double elements) const {
  std::vector<const Vector*> rows;
  for (const auto& v : vector_)
    if (v.ranks == level && v.op == op) rows.push_back(&v);
  require(!rows.empty(), "hardware profile '" + name_ + "' has no [[vector]] rate for op '" + std::string(op) +
                             "' at ranks = " + std::to_string(level) +
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

double Machine::stream_seconds(double bytes, int sharing) const {
  const auto [level, factor] = level_for(vector_levels_, sharing);
  double bytes_per_element = 0;
  for (const auto& v : vector_)
    if (v.op == "elementwise" && v.ranks == level) bytes_per_element = v.bytes_per_element;
  require(bytes_per_element > 0, "hardware profile '" + name_ +
                                     "' has no [[vector]] rate for op 'elementwise', the streaming bound of GEMMs");
  const double elements = bytes / bytes_per_element;
  return elements * seconds_per_element("elementwise", level, elements) * factor;
}

double Machine::gemm_seconds(int64_t batch, int64_t m, int64_t n, int64_t k, int sharing) const {
  if (batch == 0 || m == 0 || n == 0 || k == 0) return 0;
  const double coords[4] = {std::log2(double(batch)), std::log2(double(m)), std::log2(double(n)),
                            std::log2(double(k))};
  const auto [level, factor] = level_for(gemm_levels_, sharing);
  const double flops = 2.0 * double(batch) * double(m) * double(n) * double(k);
  const double compute = flops / gemm_rate(coords, level) * factor;
  const double operands = element_bytes_ * double(batch) * double(m * k + k * n + m * n);
  return std::max(compute, stream_seconds(operands, sharing));
}

double Machine::vector_seconds(std::string_view op, double elements, int sharing) const {
  const auto [level, factor] = level_for(vector_levels_, sharing);
  return elements * seconds_per_element(op, level, elements) * factor;
}

double Machine::collective_seconds(Coll op, double bytes, int ranks, int level) const {
  if (ranks <= 1 || bytes <= 0) return 0;
  const Collective* best = nullptr;
  double best_score = std::numeric_limits<double>::infinity();
  for (const auto& c : collectives_) {
    if (c.level != level || (c.op != op_name(op) && c.op != "any")) continue;
    // Prefer the exact op, then the group size nearest in log scale.
    double score = (c.op == "any" ? 100.0 : 0.0) +
                   (c.ranks == 0 ? 50.0 : std::abs(std::log2(double(c.ranks) / double(ranks))));
    if (score < best_score) best_score = score, best = &c;
  }
  require(best != nullptr, "hardware profile '" + name_ + "' has no [[collective]] rate for " + op_name(op) +
                               (level == MH_LINK_INTER_NODE ? " between nodes" : " inside a node") +
                               "; it cannot describe this layout");
  return best->latency + bytes * ring_factor(op, ranks) / best->bus_bandwidth;
}

}  // namespace mh::tuner
