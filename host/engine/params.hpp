// The parameters of one rank, computed in one place and carved out of one
// allocation each for values and gradients (llm.c style). Parameters are
// ordered by group so the optimizer and the tensor-parallel gradient
// reduction each act on one contiguous range per group.
//
// Values are the f32 master weights in every precision. Under mixed
// precision (a kernels component computing in bf16) GEMMs read a copy of
// them in the compute dtype, rounded after every change: the tensor cores
// take bf16 operands, while AdamW's small updates would vanish if applied to
// bf16 weights (Micikevicius et al. 2018).
//
// Megatron's distributed optimizer keeps the master weights itself, sharded
// 1/d with AdamW's state: then the set holds no values, only the copy in the
// compute dtype, which every op reads (master_weights = false).
#pragma once

#include <megahost/abi.h>

#include <array>
#include <string>
#include <vector>

#include "engine/device.hpp"
#include "engine/model.hpp"

namespace mh {

// With LoRA the adapters' groups come first, so the trainable parameters
// are one prefix of the buffer: the gradients, the optimizer and the f32
// master weights cover that prefix alone, the frozen base none of them.
enum class ParamGroup {
  kAdapterSharded,     // LoRA's B of column-parallel and A of row-parallel layers
  kAdapterReplicated,  // LoRA's A of column-parallel and B of row-parallel layers
  kShardedDecay,       // tensor-parallel shards with weight decay: wte, QKV, proj, FC1, FC2, lm_head
  kShardedNoDecay,     // column-parallel biases
  kReplicatedDecay,    // the position table
  kReplicatedNoDecay,  // layernorms and row-parallel biases
  kExpertDecay,        // a mixture of experts' expert weights: this rank's experts (parallel.expert)
  kCount
};
constexpr size_t kParamGroups = static_cast<size_t>(ParamGroup::kCount);

struct ParamInfo {
  std::string name;                  // "layers.3.qkv_w"
  int64_t rows, cols;                // local shape
  int64_t global_rows, global_cols;  // shape on one rank
  int64_t row0 = 0, col0 = 0;        // where the local block sits in the global tensor
  int32_t shard;                     // MH_ShardDim
  ParamGroup group;
  float init_std;                    // normal init; 0 means constant init_value
  float init_value;
  bool adapter = false;              // a LoRA adapter, not a weight of the base model
  // Replicated, but each tensor rank's heads give it a partial gradient
  // (QK-norm's weights), which the tensor group sums with or without SP.
  bool per_head = false;
  int64_t offset = 0;                // in elements, into values and grads
  int64_t numel() const { return rows * cols; }
};

// A linear layer's LoRA adapter: A [r, in], B [out, r]; -1 without one.
struct LoraIds {
  int a = -1, b = -1;
  bool on() const { return a >= 0; }
};

// Indices into ParamSet::infos of one layer's parameters; -1 for those its
// specification lacks (biases, layernorm's shift, SwiGLU's gate).
struct LayerParamIds {
  int ln1_w = -1, ln1_b = -1, qkv_w = -1, qkv_b = -1, proj_w = -1, proj_b = -1, ln2_w = -1, ln2_b = -1;
  int q_norm_w = -1, k_norm_w = -1;  // QK-norm's weights [1, head_dim]
  int gate_w = -1, gate_b = -1, fc1_w = -1, fc1_b = -1, fc2_w = -1, fc2_b = -1;
  LoraIds qkv_lora, proj_lora, gate_lora, fc1_lora, fc2_lora;
  // A mixture of experts' router; its experts' gate, FC1 and FC2 stack
  // the experts' matrices in gate_w, fc1_w [E moe_ffn, h] and fc2_w [E h, moe_ffn].
  int router_w = -1;
  // Its shared experts (one SwiGLU MLP of their summed width) and their
  // sigmoid gate [1, h].
  int shared_gate_w = -1, shared_fc1_w = -1, shared_fc2_w = -1, shared_expert_gate_w = -1;
  // Those present, last used first (the order backward reaches them).
  std::vector<int> ids() const;
};

struct GroupRange {
  int64_t offset = 0, count = 0;
};

// The layers and ends of the model one rank holds (its pipeline stage).
struct OwnedParts {
  std::vector<int64_t> layers;  // global indices, ascending
  bool embedding = true;        // token and position tables (first stage)
  bool head = true;             // final norm and the output layer (last stage)
};

// What the set allocates besides the weights the ops read.
struct ParamStorage {
  // Each parameter's slot is padded to a multiple of `pad_to` elements
  // (zeros that stay zero), so that any run of whole parameters, a gradient
  // bucket or the whole buffer, splits evenly over a data group of that size.
  int64_t pad_to = 1;
  bool master_weights = true;  // f32 values beside the compute-dtype copy
  bool gradients = true;       // false for inference
  bool initialize = true;      // false: every weight is about to be loaded
};

class ParamSet {
 public:
  ParamSet(Device& device, const ModelDims& dims, const MH_TensorPlan& plan, uint64_t seed, const OwnedParts& owned,
           ParamStorage storage = {});

  // Elements from the parameter's offset to the next one's: numel plus padding.
  int64_t slot(int id) const { return (infos_[id].numel() + pad_to_ - 1) / pad_to_ * pad_to_; }
  // The f32 master weights, which the set holds unless the distributed
  // optimizer does.
  bool holds_master() const { return bool(values_); }
  // A trainable parameter's value, or any parameter's in f32.
  float* value(int id) const { return values_.f32() + infos_[id].offset; }
  // Every parameter in the compute dtype, padded as the values; empty in f32.
  TypedPtr compute_copy() const { return compute_copy_.ptr(); }
  // The weight every op reads: the value itself in f32, else its copy in the
  // compute dtype. As in Megatron's bf16 training, norms, biases and
  // embeddings read the bf16 parameter like the GEMMs, so both optimizers,
  // whichever of them keeps the f32 master weights, compute one function.
  TypedPtr weight(int id) const;
  // Rounds the values into the GEMMs' copy; call after every change to the
  // values. Nothing to do in f32 or without values.
  void refresh_compute_copy();
  // The gradient of a trainable parameter; null for a frozen one (the base
  // under LoRA), whose gradient no op computes.
  float* grad(int id) const { return trainable(id) ? grads_.f32() + infos_[id].offset : nullptr; }
  bool trainable(int id) const { return infos_[id].offset < trainable_numel_; }
  // Elements of the trainable prefix (with padding): numel() without LoRA.
  int64_t trainable_numel() const { return trainable_numel_; }
  const ParamInfo& info(int id) const { return infos_[id]; }
  const std::vector<ParamInfo>& infos() const { return infos_; }
  // Global layer l, which this rank must own.
  const LayerParamIds& layer(int64_t l) const { return layers_.at(size_t(l)); }
  // -1 where the rank does not hold the parameter or the model lacks it.
  int wte() const { return wte_; }
  int wpe() const { return wpe_; }
  int lnf_w() const { return lnf_w_; }
  int lnf_b() const { return lnf_b_; }
  // The output layer's weight: the token embedding when tied, else lm_head.
  int head_w() const { return head_w_; }
  // The output end's parameters (final norm, output layer) and the input
  // end's (position table, token table), as backward finalises them.
  std::vector<int> head_ids() const;
  std::vector<int> embedding_ids() const;
  // Whether the rank holds the token table only as the tied output layer of
  // the last stage: the first stage holds the original.
  bool embedding_copy() const { return tied_copy_; }
  // Backward passes the rank makes over the token table's gradient: 2 on a
  // stage holding both ends of a tied model, else 1.
  int wte_uses() const;
  GroupRange group(ParamGroup g) const { return groups_[static_cast<size_t>(g)]; }
  // Whether a run of the buffer (never one straddling the boundary) holds
  // expert weights, reduced over the expert-data group instead of the data group.
  bool experts(const GroupRange& r) const { return r.offset >= group(ParamGroup::kExpertDecay).offset; }
  Buffer& values() { return values_; }
  Buffer& grads() { return grads_; }
  int64_t numel() const { return numel_; }  // including padding

  // Sets a parameter's weight (its value, else its compute-dtype copy) from
  // numel() host floats.
  void upload(int id, const std::vector<float>& host);

  // The full (unsharded) value of a parameter's local element (r, c), as
  // its global element gets on every layout.
  void initial_values(int id, uint64_t seed, std::vector<float>& out) const;

 private:
  int add(std::string name, int64_t global_rows, int64_t global_cols, int32_t shard, ParamGroup group,
          float init_std, float init_value);
  // The experts' stacked matrices [E rows_per_expert, cols]: this rank's
  // experts' rows (parallel.expert), whole on every tensor rank.
  int add_experts(std::string name, int64_t rows_per_expert, int64_t cols, float init_std);
  // A norm's scale (and shift under layernorm) of width h.
  void add_norm(const std::string& name, int& w, int& b);
  void add_layer(int64_t l, const MH_TensorPlan& plan);
  // The LoRA adapter of linear layer `name` [out, in] sharded as `shard`.
  LoraIds add_lora(const std::string& name, int64_t out, int64_t in, int32_t shard);
  void layout();
  void upload_initial_values(uint64_t seed);

  ModelDims dims_;
  int64_t pad_to_;
  int64_t numel_ = 0;
  int64_t trainable_numel_ = 0;
  std::vector<ParamInfo> infos_;
  std::vector<LayerParamIds> layers_;  // indexed by global layer; only owned ones are filled
  int wte_ = -1, wpe_ = -1, lnf_w_ = -1, lnf_b_ = -1, head_w_ = -1;
  bool tied_copy_ = false;
  std::array<GroupRange, kParamGroups> groups_{};
  Device& device_;
  Buffer values_, grads_;
  Buffer compute_copy_;  // values in the compute dtype; empty in f32
};

}  // namespace mh
