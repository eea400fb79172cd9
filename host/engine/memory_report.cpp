#include "engine/memory_report.hpp"

#include <algorithm>

#include "engine/parts/attention.hpp"
#include "engine/parts/mlp.hpp"

namespace mh {

// The layer's own activations (its input, the norms' outputs, the residual
// after attention and the branches' dropout masks) and those of its parts.
double activation_bytes(const ModelDims& d, double e, Activation a) {
  const double t_sp = d.sp ? double(d.tp) : 1.0;
  const double sbh = double(d.rows()) * double(d.hidden);
  switch (a) {
    case kActLayerInput:
    case kActLn1:
    case kActResidual1:
    case kActLn2: return e * sbh / t_sp;
    case kActAttnDropMask:
    case kActMlpDropMask: return sbh / t_sp;
    default: return AttentionPart::activation_bytes(d, e, a) + MlpPart::activation_bytes(d, e, a);
  }
}

ActivationFormula activation_formula(const ModelDims& d, double e, const KeepTable& keep) {
  const double t = double(d.tp), t_sp = d.sp ? t : 1.0;
  const double sbh = double(d.rows()) * double(d.hidden);
  ActivationFormula out{};
  for (const auto& layer : keep)
    for (int a = 0; a < kActCount; ++a)
      if (layer[size_t(a)]) out.per_layer += activation_bytes(d, e, static_cast<Activation>(a));
  out.per_layer /= double(std::max<size_t>(1, keep.size()));
  // Embedding dropout mask, final layernorm input and output, fp32 logits.
  out.extra = sbh * (1 + 2 * e) / t_sp + double(d.rows()) * double(d.vocab) * 4 / t;
  return out;
}

double scheduled_activation_bytes(const ModelDims& d, double e, const std::vector<ChunkSpec>& chunks,
                                  const KeepTable& keep, std::span<const MH_PipeAction> schedule) {
  const double t = double(d.tp), t_sp = d.sp ? t : 1.0;
  const double sbh = double(d.rows()) * double(d.hidden);
  std::vector<double> chunk_bytes;
  size_t layer = 0;
  for (const ChunkSpec& c : chunks) {
    double bytes = 0;
    for (int64_t l = 0; l < c.layers; ++l, ++layer)
      for (int a = 0; a < kActCount; ++a)
        if (keep[layer][size_t(a)]) bytes += activation_bytes(d, e, static_cast<Activation>(a));
    if (c.first) bytes += sbh / t_sp;
    if (c.last) bytes += 2 * e * sbh / t_sp + double(d.rows()) * double(d.vocab) * 4 / t;
    chunk_bytes.push_back(bytes);
  }
  double now = 0, peak = 0;
  for (const MH_PipeAction& a : schedule) {
    if (a.type == MH_PIPE_FORWARD) now += chunk_bytes[size_t(a.chunk)];
    if (a.type == MH_PIPE_BACKWARD) now -= chunk_bytes[size_t(a.chunk)];
    peak = std::max(peak, now);
  }
  return peak;
}

nlohmann::json memory_peaks(const MemoryTracker& m) {
  nlohmann::json j;
  for (size_t c = 0; c < kMemCategories; ++c) {
    auto cat = static_cast<MemCategory>(c);
    j[category_name(cat)] = m.peak(cat);
  }
  j["total"] = m.total_peak();
  return j;
}

}  // namespace mh
