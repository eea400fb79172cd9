#include "engine/memory_report.hpp"

namespace mh {

ActivationFormula activation_formula(const ModelDims& d, double e) {
  const double s = double(d.seq), b = double(d.micro_batch), h = double(d.hidden), a = double(d.heads);
  const double t = double(d.tp), f = double(d.ffn), t_sp = d.sp ? t : 1.0;
  const double sbh = s * b * h;
  ActivationFormula out{};
  // Replicated without SP: two layernorm inputs and outputs, two dropout masks.
  out.per_layer = sbh * (4 * e + 2) / t_sp;
  // Split across t: Q, K, V, the context, the two MLP activations; the
  // softmax output, its mask and the dropout output.
  out.per_layer += sbh * (4 * e + 2 * e * f / h) / t + a * s * s * b * (2 * e + 1) / t;
  // Embedding dropout mask, final layernorm input and output, fp32 logits.
  out.extra = sbh * (1 + 2 * e) / t_sp + s * b * double(d.vocab) * 4 / t;
  return out;
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
