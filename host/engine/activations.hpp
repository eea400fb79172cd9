// What one micro-batch's forward keeps for backward, per layer, named by
// Activation. Entry kActLayerInput of layer l + 1 is layer l's output; the
// extra layer at index `layers` holds the final layernorm's input.
// An empty buffer means "not kept": the engine recomputes it in backward.
#pragma once

#include <megahost/abi.h>

#include <array>
#include <memory>
#include <vector>

#include "engine/device.hpp"

namespace mh {

// The activations a layer keeps, as the engine indexes them. The ABI names
// them by string (abi.h, "Recompute"); kActivationNames holds those names in
// this order, so a model that adds one changes no plugin.
enum Activation : int32_t {
  kActLayerInput,    // residual stream entering the layer
  kActLn1,           // first norm's output (the QKV input)
  kActQkv,           // Q, K, V
  kActAttnScores,    // softmax output
  kActAttnMask,      // attention dropout mask
  kActAttnProbs,     // attention dropout output
  kActContext,       // attention output, the projection's input
  kActAttnDropMask,  // dropout mask after the projection
  kActResidual1,     // residual stream after attention
  kActLn2,           // second norm's output (the MLP's input)
  kActFc1,           // FC1's output (with the gate's, in a gated MLP)
  kActGelu,          // the MLP activation's output, FC2's input
  kActMlpDropMask,   // dropout mask after FC2
  kActCount
};

inline constexpr std::array<const char*, kActCount> kActivationNames = {
    "layer_input", "norm1",     "qkv",  "attn_scores", "attn_mask", "attn_probs",  "attn_context",
    "attn_out_mask", "residual1", "norm2", "fc1",        "mlp_act",   "mlp_out_mask"};

// A mixture-of-experts layer's routing of one micro-batch
// (parts/moe_mlp.hpp): which experts each row goes to, with which weights,
// and where its copies sit in the expert-sorted slots. Kept beside the
// activations until the layer's backward, so recomputing the experts routes
// as the forward did.
struct MoeRouting {
  std::vector<float> probs;     // [rows, E]: softmax of the router logits
  std::vector<int32_t> expert;  // [rows, k]: the chosen experts
  std::vector<float> gate;      // [rows, k]: their combine weights
  std::vector<int32_t> slot;    // [rows, k]: the slot of each choice; -1 where a capacity dropped it
  std::vector<int64_t> offset;  // [E + 1]: each expert's slots; offset[E] the slots in use
  // [E]: the choices of each expert, before a capacity drops any; with a
  // load-balancing loss, over the micro-batch's rows on every context rank
  std::vector<int64_t> load;
  int64_t rows = 0;             // the rows load counts: the micro-batch's over the context group
  Buffer tokens;                // I32 [rows k]: the row each slot holds
  Buffer gates;                 // [rows k], compute dtype: each slot's weight
  double aux = 0;               // the load-balancing loss, coefficient included
  float aux_weight = 0;         // its weight in the objective (LayerPass)
  std::vector<float> dgate;     // [rows k] by slot: the loss's gradient of each weight
  // Expert parallelism (parallel.expert): the rows of this rank's experts,
  // received from every rank of the expert group (source-major as they
  // arrive, expert-major for the GEMMs). Without it they are the slots.
  std::vector<int64_t> send_rows, recv_rows;  // [ep]: slots to and from each rank of the group
  std::vector<int64_t> local_offset;          // [E / ep + 1]: each local expert's rows
  int64_t received = 0;                       // rows of the local experts
  Buffer expert_order, arrival_order;         // I32 [received]: row gathers from one order to the other
  // The shared experts' gate sigmoid(x g) per row (parts/shared_expert.hpp),
  // in the compute dtype and on the host; empty without the gate.
  Buffer shared_gate;
  std::vector<float> shared_gate_host;

  int64_t kept() const { return offset.back(); }
};

struct LayerActivations {
  std::array<Buffer, kActCount> slot;
  std::shared_ptr<MoeRouting> routing;  // mixture-of-experts layers only

  Buffer& operator[](Activation a) { return slot[a]; }
  bool has(Activation a) const { return bool(slot[a]); }
  bool complete() const {
    for (const auto& b : slot)
      if (!b) return false;
    return true;
  }
  void clear() {
    for (auto& b : slot) b.release();
    routing.reset();
  }
};

// A layernorm's output [n, h] in `dtype` followed by its mean and rstd
// [2, n] in f32, as one buffer: keeping, dropping or recomputing the output
// does the same to its statistics. The statistics are f32 in every
// precision (the kernels read and write them in f32); the output is padded
// so that they start 4-byte aligned.
inline int64_t layernorm_stats_offset(int64_t n, int64_t h, int32_t dtype) {
  const int64_t e = int64_t(dtype_size(dtype));
  return (n * h * e + 3) / 4 * 4 / e;
}
inline Buffer layernorm_buffer(Device& device, MemCategory category, int64_t n, int64_t h, int32_t dtype) {
  return Buffer(device, category, layernorm_stats_offset(n, h, dtype) + 2 * n * 4 / int64_t(dtype_size(dtype)), dtype);
}
inline float* layernorm_stats(const Buffer& out, int64_t n, int64_t h) {
  return static_cast<float*>((out.ptr() + layernorm_stats_offset(n, h, out.dtype())).data);
}

// keep[l][a]: the recompute policy's decision for layer l, activation a.
using KeepTable = std::vector<std::array<bool, kActCount>>;

}  // namespace mh
