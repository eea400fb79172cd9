// Model FLOPs of one training step: the figure Megatron-LM reports
// throughput and MFU in, as Korthikanti et al. 2022 ([K22] Eq. 7) count it
// and the PaLM paper's appendix B defines model FLOPs: the matrix products
// of the model alone (no recomputation), forward once and backward twice,
// 2 FLOPs per multiply-add, the attention's s^2 products counted whole
// (not halved for the causal mask). Generalised to grouped-query attention
// (the QKV projection is (a + 2k) D wide) and to a gated MLP (a third
// h x f matrix), and to a head size D other than h/a (Qwen3, Gemma): the
// output projection reads a D, the s^2 products run over a D. With k = a,
// D = h/a and a GeLU MLP of f = 4h it is Eq. 7's
// 72 B L s h^2 (1 + s/6h + V/12hL). The engine and the tuner both report
// MFU from it.
#pragma once

#include <cstdint>

namespace mh {

struct ModelFlopsShape {
  int64_t layers = 0, hidden = 0, heads = 0, kv_heads = 0, ffn = 0, seq = 0, vocab = 0;
  bool gated_mlp = false;  // SwiGLU: a gate matrix beside FC1
  int64_t head_dim = 0;    // D; 0 means hidden / heads
};

// FLOPs of a step over `sequences` sequences of shape.seq tokens.
inline double model_flops(const ModelFlopsShape& m, int64_t sequences) {
  const double B = double(sequences), s = double(m.seq), h = double(m.hidden), f = double(m.ffn);
  const double kv = double(m.kv_heads > 0 ? m.kv_heads : m.heads);
  const double D = m.head_dim > 0 ? double(m.head_dim) : h / double(m.heads), aD = double(m.heads) * D;
  const double qkv = (double(m.heads) + 2 * kv) * D;
  const double mlp_matrices = m.gated_mlp ? 3 : 2;
  const double layer = 2 * B * s * (qkv * h + aD * h + mlp_matrices * h * f) + 4 * B * s * s * aD;
  return 3 * (double(m.layers) * layer + 2 * B * s * h * double(m.vocab));
}

}  // namespace mh
