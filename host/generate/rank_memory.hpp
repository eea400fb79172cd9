// A generating rank's memory peaks, as the dry run and the metrics report
// them: the weights, the KV cache and the transients of one step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "engine/memory.hpp"

namespace mh::generate {

struct RankMemory {
  uint64_t params = 0, kv_cache = 0, activations = 0, workspace = 0, comm = 0, total = 0;
};

std::vector<uint64_t> to_counts(const MemoryTracker& m);
// all_gather_counts' result, rank after rank.
std::vector<RankMemory> from_counts(const std::vector<uint64_t>& all);
nlohmann::json to_json(const std::vector<RankMemory>& ranks);
// The table a dry run prints, MiB per rank.
std::string memory_table(const std::vector<RankMemory>& ranks);

}  // namespace mh::generate
