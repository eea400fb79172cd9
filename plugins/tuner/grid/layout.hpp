// A candidate as the cost model reads it: the model it splits, how it
// splits it, and where its groups sit on the cluster. Notation as in the
// papers: t tensor, p pipeline stages, v model chunks per stage, d data
// parallel, b micro-batch, m micro-batches per pipeline per step.
#pragma once

#include <megahost/abi.h>

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "machine.hpp"

namespace mh::tuner {

struct Model {
  int64_t layers, hidden, heads, ffn, seq, vocab, global_batch;
  int64_t kv_heads = 0;    // key/value heads (grouped-query attention); 0 means heads
  bool gated = false;      // SwiGLU: a gate GEMM beside FC1
  bool untied = false;     // the output layer has its own weight
  bool rotary = false;     // RoPE instead of a position table
  int64_t head_size = 0;   // a head's size D; 0 means hidden / heads
  // A mixture of experts (ABI 2.1): ffn is then the active width, k routed
  // experts' and the shared ones' (the engine's ModelDims::active_ffn).
  int64_t experts = 0, router_topk = 0, moe_ffn = 0, shared_experts = 0, shared_ffn = 0;
  bool flash = false;      // the flash attention core (ring attention needs it)

  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t head_dim() const { return head_size > 0 ? head_size : hidden / heads; }
  // The attention's width a D: the context the output projection reads.
  int64_t attention_width() const { return heads * head_dim(); }
  // Q, K and V of all heads: (a + 2k) D.
  int64_t qkv() const { return (heads + 2 * kv()) * head_dim(); }
  // FC1's width: the gate beside the up projection under SwiGLU.
  int64_t fc1() const { return gated ? 2 * ffn : ffn; }
  bool moe() const { return experts > 0; }

  static Model from(const MH_ModelShape& shape);
};

// The activations of a layer the cost model prices recomputing, in the
// order of kActivationNames, the names the host reports them under
// (MH_Estimate.activations).
enum Activation : int32_t {
  kActLayerInput,
  kActLn1,
  kActQkv,
  kActAttnScores,
  kActAttnMask,
  kActAttnProbs,
  kActContext,
  kActAttnDropMask,
  kActResidual1,
  kActLn2,
  kActFc1,
  kActGelu,
  kActMlpDropMask,
  kActCount
};

inline constexpr std::array<const char*, kActCount> kActivationNames = {
    "layer_input", "norm1",     "qkv",  "attn_scores", "attn_mask", "attn_probs",  "attn_context",
    "attn_out_mask", "residual1", "norm2", "fc1",        "mlp_act",   "mlp_out_mask"};

// keep[l][a]: whether the engine keeps activation a of layer l for
// backward, as the candidate's recompute policy decided.
using LayerKeep = std::array<bool, kActCount>;
using KeepTable = std::vector<LayerKeep>;

struct Layout {
  int32_t t = 1, p = 1, v = 1, d = 1, b = 1;
  bool sp = false;
  std::string recompute = "none";  // the recompute policy's component name
  int32_t recompute_layers = 0;    // "full": layers per checkpointed group
  // Megatron's distributed optimizer (gradients reduce-scattered, AdamW on
  // 1/d, parameters all-gathered) and the gather overlapped with the next
  // forward.
  bool distributed_optimizer = false, overlap_param_gather = false;
  // Context parallelism: each sequence split over cp ranks (2 cp chunks,
  // causally load-balanced), keys and values exchanged by cp_comm
  // ("all_gather", "p2p" ring or "a2a" Ulysses; empty at cp = 1). Expert
  // parallelism: ep of the data, context and tensor ranks hold E / ep
  // experts each and trade tokens by all-to-all.
  int32_t cp = 1, ep = 1;
  std::string cp_comm;

  int64_t microbatches(const Model& m) const { return m.global_batch / (int64_t(b) * d); }
  int64_t layers_per_chunk(const Model& m) const { return m.layers / (int64_t(p) * v); }
  int32_t world() const { return t * cp * p * d; }
  // The ranks that hold the same weights and reduce their gradients
  // together: the data replicas and their context ranks.
  int32_t data_group() const { return d * cp; }
  // The ranks of a stage expert parallelism draws from: the data group's
  // and their tensor ranks (the experts are whole on each).
  int32_t expert_ranks() const { return d * cp * t; }
};

// Which link each group's collectives cross, and how many ranks share one
// device (all ranks of a node on a CPU, one on a GPU). Megatron's rank
// order: tensor fastest, then context, then data (the expert groups ep
// consecutive ranks of these), then pipeline.
struct Placement {
  int32_t tp_level = MH_LINK_INTRA_NODE, dp_level = MH_LINK_INTRA_NODE, pp_level = MH_LINK_INTRA_NODE;
  int32_t cp_level = MH_LINK_INTRA_NODE, ep_level = MH_LINK_INTRA_NODE;
  int32_t sharing = 1;
  // Pipeline messages of 1/t of an activation per rank, as Megatron's
  // scatter/gather sends them ([N21] 4.1); megahost's engine sends each
  // rank's local rows (1/t only with sequence parallelism).
  bool scatter_gather = false;

  static Placement of(const Layout& l, int32_t devices_per_node, bool shared_device);
  // The device's sharing while `stages` of the p pipeline stages compute
  // (a pipeline filling or draining, or inference's one stage at a time).
  Sharing busy_stages(int32_t stages, int32_t p) const;
};

}  // namespace mh::tuner
