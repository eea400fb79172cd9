#include "generate/rank_memory.hpp"

#include <cstdio>

namespace mh::generate {
namespace {

constexpr size_t kFields = 6;

double mib(uint64_t bytes) { return double(bytes) / double(1 << 20); }

}  // namespace

std::vector<uint64_t> to_counts(const MemoryTracker& m) {
  return {m.peak(MemCategory::kParams), m.peak(MemCategory::kKvCache),  m.peak(MemCategory::kActivations),
          m.peak(MemCategory::kWorkspace), m.peak(MemCategory::kComm), m.total_peak()};
}

std::vector<RankMemory> from_counts(const std::vector<uint64_t>& all) {
  std::vector<RankMemory> ranks;
  for (size_t i = 0; i + kFields <= all.size(); i += kFields)
    ranks.push_back(RankMemory{all[i], all[i + 1], all[i + 2], all[i + 3], all[i + 4], all[i + 5]});
  return ranks;
}

nlohmann::json to_json(const std::vector<RankMemory>& ranks) {
  nlohmann::json out = nlohmann::json::array();
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankMemory& m = ranks[r];
    out.push_back({{"rank", r}, {"params", m.params}, {"kv_cache", m.kv_cache}, {"activations", m.activations},
                   {"workspace", m.workspace}, {"comm", m.comm}, {"total", m.total}});
  }
  return out;
}

std::string memory_table(const std::vector<RankMemory>& ranks) {
  std::string text =
      "memory per rank, MiB (peaks of one prefill of the longest prompts and one decode step)\n"
      " rank    params  kv_cache  activ.  workspace     comm     total\n";
  char line[160];
  for (size_t r = 0; r < ranks.size(); ++r) {
    const RankMemory& m = ranks[r];
    std::snprintf(line, sizeof line, "%5zu %9.2f %9.2f %7.2f %10.2f %8.2f %9.2f\n", r, mib(m.params),
                  mib(m.kv_cache), mib(m.activations), mib(m.workspace), mib(m.comm), mib(m.total));
    text += line;
  }
  return text;
}

}  // namespace mh::generate
