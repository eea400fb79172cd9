// Dimensions of the model as one rank sees them, and the specification of
// its parts. One-letter names follow the paper: s sequence, b micro-batch,
// h hidden, a heads, k key/value heads, f MLP inner size, V vocabulary, t
// tensor-parallel size, cp context-parallel size. The residual stream is laid
// out [s, b, h] (sequence first), so a sequence shard is a contiguous block of
// rows; "rows" below means s*b of the rank's s/cp positions.
#pragma once

#include <cstdint>

namespace mh {

// The parts a layer is assembled from (docs/models.md). GPT-2 and Llama are
// two specifications, set by model.arch as presets of these.
enum class Norm { kLayerNorm, kRmsNorm };
enum class Position { kLearned, kRope };
enum class MlpActivation { kGelu, kSwiglu };
// How the full-sequence attention core computes (docs/models.md): unfused
// (GEMMs, softmax and dropout over stored [s, s] scores) or flash (the
// kernels' attention op, which stores a log-sum-exp per row instead).
enum class AttentionBackend { kUnfused, kFlash };

// How attention crosses the context group (parallel.context.comm_type):
// keys and values all-gathered, passed around a ring block by block (p2p),
// or Ulysses' all-to-all from sequence shards to whole sequences of 1/cp of
// the heads and back.
enum class ContextComm { kAllGather, kP2p, kA2a };

struct ModelSpec {
  Norm norm = Norm::kLayerNorm;
  Position position = Position::kLearned;
  MlpActivation activation = MlpActivation::kGelu;
  AttentionBackend attention_backend = AttentionBackend::kUnfused;
  bool tie_embeddings = true;  // the output layer reads the token embedding
  bool bias = true;            // biases on the linear layers
  bool qkv_bias = false;       // biases on QKV alone (Qwen2) where `bias` is false
  // QK-norm (Qwen3): RMSNorm over each query and key head before the
  // position encoding, one weight [head_dim] for the queries, one for the keys.
  bool qk_norm = false;
  float rope_theta = 10000;
  // Mixture of experts (docs/models.md): with experts > 0 the MLP is
  // `experts` SwiGLU experts of width moe_ffn, each token routed to
  // router_topk of them. router_norm_topk: the k gates are the softmax
  // renormalised over the chosen k (Mixtral, Qwen's norm_topk_prob), else
  // the softmax over all experts as it is.
  int64_t experts = 0, router_topk = 2;
  bool router_norm_topk = true;
  float router_aux_loss_coef = 0;
  // Shared experts (Qwen2-MoE, DeepSeek-MoE): SwiGLU experts every token
  // passes through beside its routed ones, their output added to the
  // routed experts'; with shared_expert_gate scaled by sigmoid(x g), g [1, h]
  // (Qwen2-MoE).
  int64_t shared_experts = 0;
  bool shared_expert_gate = false;
  // Token capacity (Megatron's --moe-expert-capacity-factor): each expert
  // takes at most ceil(factor rows k / E) of the micro-batch's slots; 0 is
  // dropless.
  float capacity_factor = 0;
};

// LoRA adapters on a layer's linear layers (docs/finetune.md): each
// targeted y = x W^T gains scale * (x A^T) B^T, A [r, in] random, B [out, r]
// zero, scale = alpha / r; the base weights are frozen.
enum LoraTarget : uint32_t { kLoraQkv = 1, kLoraProj = 2, kLoraFc1 = 4, kLoraFc2 = 8, kLoraGate = 16 };

struct LoraSpec {
  int64_t rank = 0;  // 0: no adapters, every weight trains
  float scale = 0;   // alpha / rank
  uint32_t targets = 0;
  float dropout = 0;  // on the adapters' input in training (peft.dropout)
  bool on() const { return rank > 0; }
  bool targets_any(uint32_t t) const { return on() && (targets & t) != 0; }
};

struct ModelDims {
  int64_t layers, hidden, heads, ffn, seq, vocab, micro_batch;
  int64_t moe_ffn = 0;       // an expert's inner size (spec.experts > 0)
  int64_t shared_ffn = 0;    // a shared expert's inner size (spec.shared_experts > 0)
  int64_t kv_heads = 0;      // 0 means heads (full multi-head attention)
  // [model] head_dim: a head's size (Qwen3, Gemma, Mistral-Nemo decouple it
  // from hidden/heads); 0 means hidden / heads.
  int64_t head_size = 0;
  int64_t vocab_size = 0;    // the tokenizer's; vocab is it padded, 0 means vocab
  int64_t max_positions = 0;  // the positions the model is made for; 0 means seq
  int32_t tp = 1, tp_rank = 0;
  // Expert parallelism: the ranks of the expert group, each holding
  // experts / ep consecutive experts (docs/parallelism.md).
  int32_t ep = 1, ep_rank = 0;
  bool sp = false;
  // Context parallelism (docs/parallelism.md): the rank holds s/cp of every
  // sequence's positions, as one chunk of cp, or with cp_balanced the chunks
  // cp_rank and 2 cp - 1 - cp_rank of 2 cp (Megatron's causal load balancing).
  int32_t cp = 1, cp_rank = 0;
  bool cp_balanced = false;
  ContextComm cp_comm = ContextComm::kAllGather;
  float dropout = 0, attention_dropout = 0, init_std = 0.02f, layernorm_eps = 1e-5f;
  ModelSpec spec;
  LoraSpec lora;

  int64_t head_dim() const { return head_size > 0 ? head_size : hidden / heads; }
  int64_t kv() const { return kv_heads > 0 ? kv_heads : heads; }
  int64_t local_heads() const { return heads / tp; }
  int64_t local_kv_heads() const { return kv() / tp; }
  // The attention's width: the context the output projection reads, a D.
  int64_t attention_width() const { return heads * head_dim(); }
  int64_t local_attention() const { return attention_width() / tp; }  // its rank's share
  // Q, K and V of the rank's heads: a + 2k heads of head_dim each, over t.
  int64_t local_qkv() const { return (heads + 2 * kv()) / tp * head_dim(); }
  int64_t local_ffn() const { return ffn / tp; }
  // FC1's output: the gate beside the up projection under SwiGLU.
  int64_t local_fc1() const { return spec.activation == MlpActivation::kSwiglu ? 2 * local_ffn() : local_ffn(); }
  int64_t local_vocab() const { return vocab / tp; }
  int64_t vocab_start() const { return tp_rank * local_vocab(); }
  int64_t real_vocab() const { return vocab_size > 0 ? vocab_size : vocab; }
  bool moe() const { return spec.experts > 0; }
  // The MLP width one token's FLOPs go through: its k experts' and the
  // shared experts' under a mixture of experts (the model FLOPs and the
  // tuner's cost model price these; the router's h E and the shared gate's
  // h are left out), else ffn.
  int64_t active_ffn() const { return moe() ? spec.router_topk * moe_ffn + shared_width() : ffn; }
  // The shared experts' width: n shared experts of width F are one SwiGLU
  // MLP of width n F (their outputs add up).
  int64_t shared_width() const { return spec.shared_experts * shared_ffn; }
  // Expert slots of the rank's rows: every row to its k experts (dropless; a
  // capacity keeps at most these). The mixture of experts routes the rows
  // the rank holds outside the tensor-parallel regions, its sequence shard
  // under sequence parallelism (docs/parallelism.md).
  int64_t routed_rows() const { return local_rows() * spec.router_topk; }
  int64_t local_seq() const { return seq / cp; }
  // The rank's chunks of the sequence: chunks() of chunk_len() positions each.
  int64_t chunks() const { return cp_balanced ? 2 : 1; }
  int64_t chunk_len() const { return local_seq() / chunks(); }
  // Which of the sequence's chunks context rank r holds as its chunk k.
  int64_t chunk_index(int32_t r, int64_t k) const { return k == 0 ? r : 2 * cp - 1 - r; }
  // The global position of local chunk k's first token.
  int64_t chunk_start(int64_t k) const { return chunk_index(cp_rank, k) * chunk_len(); }
  // The global position of the rank's local position t.
  int64_t global_position(int64_t t) const { return chunk_start(t / chunk_len()) + t % chunk_len(); }
  // The global [s, b] row of the rank's local row r.
  int64_t global_row(int64_t r) const { return global_position(r / micro_batch) * micro_batch + r % micro_batch; }
  int64_t local_experts() const { return spec.experts / ep; }
  int64_t first_expert() const { return ep_rank * local_experts(); }
  int64_t rows() const { return local_seq() * micro_batch; }
  // Rows of the norm and dropout regions: a sequence shard with SP.
  int64_t local_rows() const { return sp ? rows() / tp : rows(); }
  int64_t first_local_row() const { return sp ? tp_rank * local_rows() : 0; }
};

}  // namespace mh
