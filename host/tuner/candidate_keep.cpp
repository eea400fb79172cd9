#include "tuner/candidate_keep.hpp"

#include <megahost/error.hpp>

#include "plugins/assembly.hpp"
#include "engine/keep_table.hpp"

namespace mh {

std::vector<int32_t> candidate_keep_table(const std::filesystem::path& candidate_config, const Registry& registry,
                                          const MH_Candidate& c, int64_t layers) {
  Diagnostics diag;
  std::optional<Config> config = Config::load(candidate_config.string(), {}, diag);
  std::optional<Slot> slot = config ? assemble_slot(*config, registry, MH_KIND_RECOMPUTE, diag) : std::nullopt;
  require(slot.has_value() && !diag.has_errors(), diag.report());
  const Instance policy(*slot, 1, -1);
  const AttentionBackend backend = config->root()["model"]["attention_backend"].value<std::string>() == "flash"
                                       ? AttentionBackend::kFlash
                                       : AttentionBackend::kUnfused;
  const int64_t chunks = int64_t(c.pipeline) * c.virtual_stages, per_chunk = layers / chunks;
  require(per_chunk * chunks == layers, "the candidate's p * v does not divide the layers");
  std::vector<int32_t> out;
  out.reserve(size_t(layers * kActCount));
  for (int64_t k = 0; k < chunks; ++k) {
    const ChunkSpec chunk{k * per_chunk, per_chunk, k == 0, k + 1 == chunks};
    for (const auto& layer : keep_table(policy, chunk, backend))
      for (bool kept : layer) out.push_back(kept ? MH_KEEP : MH_RECOMPUTE);
  }
  return out;
}

}  // namespace mh
