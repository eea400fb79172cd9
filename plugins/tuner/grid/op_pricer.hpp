// Prices the ops of megahost's engine (host/engine/transformer.cpp) one by
// one on a machine: the building block of the training and inference cost
// models. Dimensions as in host/engine/model.hpp: n rows (s / cp * b), nl the
// rows of the layernorm and dropout regions (n / t with SP), hl = a D / t
// (the attention's width, h / t where D = h / a), fl = f / t, V the local vocabulary, g = b * a / t attention groups, dh the
// head size; the model's parts (docs/models.md) set the widths of QKV and
// FC1 and which ops run. A mixture of experts is no tensor-parallel region:
// its whole experts (fl = f, the active width) run on nm rows, the rank's
// sequence shard in training (nl) and every row in generation (n), with no
// collective at its entry or exit.
#pragma once

#include <cstdint>

#include "layout.hpp"
#include "machine.hpp"

namespace mh::tuner {

inline constexpr double kFp32 = 4;

// Seconds by resource: GEMMs, memory-bound ops, collectives.
struct Seconds {
  double gemm = 0, vector = 0, comm = 0;

  double total() const { return gemm + vector + comm; }
  Seconds& operator+=(const Seconds& o);
  Seconds operator*(double k) const;
};

class Pricer {
 public:
  // `sharing`: of the ranks on the device, how many compute meanwhile;
  // train = false prices inference: no dropout.
  Pricer(const Machine& machine, const Model& model, const Layout& l, const Placement& w, Sharing sharing,
         bool train = true);

  // What was priced since the last take.
  Seconds take();
  // Generation on a shared device: every product's second operand (weights,
  // or the cached keys and values) is read from a working set of `bytes`
  // per rank, at the rate of a set that size beyond the cache
  // (Machine::working_set_seconds; 0: each operand streamed alone, as in
  // training). A GPU's caches hold little of a model, so there the
  // operands' own streaming bound stands.
  void reading_from(double bytes) { working_set_ = bytes; }

  void gemm(int64_t batch, int64_t m, int64_t n, int64_t k);
  void vec(const char* op, int64_t elements);
  void tp(Coll op, double bytes);
  double act(int64_t elements) const;

  // A layer's forward as the engine runs it (Transformer::layer_forward):
  // only the ops whose outputs are missing from `have`, and the output
  // projection of the MLP also when the next layer's input is needed. The
  // default is the whole forward.
  void layer_forward(const LayerKeep& have = {}, bool need_output = true);
  void layer_backward();
  void embedding_forward();
  void embedding_forward_backward();
  void head_forward_backward();
  // Ops without a profile rate of their own (RoPE, SwiGLU, copies) are priced
  // by their memory traffic at the streaming rate: `passes` reads and writes
  // of `elements` activations. (RMSNorm moves what layernorm moves and is
  // priced as layernorm.)
  void traffic(double elements, double passes);
  void rope();
  void activation_forward();
  // A mixture of experts' router product (nothing for a dense model).
  void router_forward();

  const int64_t s, h, V, n, nl, hl, fl, g, dh;
  const int64_t ql, f1l;  // QKV's and FC1's local widths
  const int64_t nm;       // the MLP's rows
  // The attention core's products with context parallelism: ga products of
  // sq query rows by sk key rows (at cp = 1: g, s, s).
  const int64_t ga, sq, sk;
  const bool gated, rotary;

 private:
  void dropout(int64_t elements);
  void enter_fwd();
  void enter_bwd();
  void exit_fwd();
  void exit_bwd();
  // Over `rows` rows, a tensor-parallel region's exit when `region`.
  void residual_branch(int64_t rows, int64_t width, bool region);
  void attention_forward(const LayerKeep& have);
  void residual_branch_backward(bool region);
  void linear_backward(int64_t rows, int64_t in, int64_t out, bool regather);
  // Context parallelism's exchanges of one layer's attention core.
  void context_forward_in();
  void context_forward_out();
  void context_backward();
  // A mixture of experts: the router's backward, and one all-to-all of the
  // routed rows over the expert group (dispatch or combine).
  void router_backward();
  void expert_exchange();
  // An all-to-all of `bytes` (this rank's whole tensor) over `ranks`.
  void all_to_all(double bytes, int32_t ranks, int32_t level);

  const Machine& mc_;
  const Model& m_;
  const Layout& l_;
  const Placement& w_;
  Sharing sharing_;
  bool train_;
  double working_set_ = 0;
  Seconds out_;
};

}  // namespace mh::tuner
