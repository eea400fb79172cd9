#include "engine/keep_agreement.hpp"

#include <megahost/error.hpp>

#include <vector>

namespace mh {

void check_keep_tables_agree(Collectives& tensor, const KeepTable& keep, const std::string& policy) {
  if (tensor.size() <= 1) return;
  std::vector<float> mine;
  for (const auto& layer : keep)
    for (bool k : layer) mine.push_back(k ? 1.0f : 0.0f);
  std::vector<float> all(mine.size() * size_t(tensor.size()));
  tensor.all_gather_host(mine.data(), all.data(), int64_t(mine.size()));
  for (size_t i = 0; i < mine.size(); ++i) {
    if (mine[i] == all[i]) continue;
    throw Error(MH_INVALID_ARGUMENT,
                policy + " decides differently on tensor-group rank " + std::to_string(tensor.rank()) +
                    " than on rank 0 (layer " + std::to_string(i / kActCount) + " of the stage, activation " +
                    std::to_string(i % kActCount) + "); a recompute policy's decisions must be a function of "
                    "the query alone, never of the rank (docs/parallelism.md)");
  }
}

}  // namespace mh
