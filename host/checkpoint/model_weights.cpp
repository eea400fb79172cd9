#include "checkpoint/model_weights.hpp"

#include <megahost/error.hpp>

#include <array>
#include <vector>

#include "checkpoint/model_keys.hpp"
#include "checkpoint/rank_state.hpp"
#include "checkpoint/store.hpp"
#include "checkpoint/tensor_reader.hpp"

namespace mh::ckpt {

ModelShape checkpoint_model(const ModelDims& d, const std::string& arch) {
  ModelShape m;
  m.layers = d.layers;
  m.hidden = d.hidden;
  m.heads = d.heads;
  m.ffn = d.ffn;
  m.seq_len = d.seq;
  m.max_positions = d.max_positions > 0 ? d.max_positions : d.seq;
  m.vocab = d.vocab;
  m.vocab_size = d.real_vocab();
  m.arch = arch;
  m.normalization = d.spec.norm == Norm::kRmsNorm ? "rmsnorm" : "layernorm";
  m.position = d.spec.position == Position::kRope ? "rope" : "learned";
  m.rope_theta = shortest_double(d.spec.rope_theta);
  m.activation = d.spec.activation == MlpActivation::kSwiglu ? "swiglu" : "gelu";
  m.kv_heads = d.kv();
  m.head_size = d.head_dim();
  m.tie_embeddings = d.spec.tie_embeddings;
  m.bias = d.spec.bias;
  m.norm_eps = shortest_double(d.layernorm_eps);
  if (d.moe()) {
    m.experts = d.spec.experts;
    m.router_topk = d.spec.router_topk;
    m.moe_ffn = d.moe_ffn;
    m.router_norm_topk = d.spec.router_norm_topk;
    m.router_aux_loss_coef = shortest_double(d.spec.router_aux_loss_coef);
    m.shared_experts = d.spec.shared_experts;
    m.shared_ffn = d.spec.shared_experts > 0 ? d.shared_ffn : 0;
    m.shared_expert_gate = d.spec.shared_expert_gate;
  }
  m.qkv_bias = d.spec.qkv_bias && !d.spec.bias;
  m.qk_norm = d.spec.qk_norm;
  return m;
}

void check_model(const std::string& path, const Metadata& saved, const ModelDims& d) {
  std::string listed;
  for (const std::string& diff : shape_differences(saved.model, checkpoint_model(d, saved.model.arch)))
    listed += "\n  " + diff;
  require(listed.empty(), "checkpoint " + path + " is of another model:" + listed +
                              "\nset [model] as the checkpoint was saved, or load a checkpoint of this model");
}

void load_weights(const std::string& path, const Metadata& saved, ParamSet& params, int32_t tp_rank, WeightsOf which) {
  TensorReader reader(path, saved);
  std::vector<float> host;
  for (size_t id = 0; id < params.infos().size(); ++id) {
    const ParamInfo& p = params.info(int(id));
    if (p.adapter != (which == WeightsOf::kAdapters)) continue;
    const auto it = saved.tensors.find(p.name);
    require(it != saved.tensors.end(), path + "/" + kMetadataFile + ": tensor '" + p.name +
                                           "' is missing from the index; the checkpoint is incomplete or of another model");
    const std::array<int64_t, 2> shape{p.global_rows, p.global_cols};
    require(it->second.shape == shape, path + ": tensor '" + p.name + "' is [" + std::to_string(it->second.shape[0]) +
                                           ", " + std::to_string(it->second.shape[1]) + "], this model's is [" +
                                           std::to_string(shape[0]) + ", " + std::to_string(shape[1]) + "]");
    const Rect rect = shard_rect(p);
    host.assign(size_t(rect.numel()), 0.f);
    require(reader.read(p.name, it->second, rect, host.data()) == rect.numel(),
            path + ": tensor '" + p.name + "' does not cover the part tensor rank " + std::to_string(tp_rank) +
                " needs");
    params.upload(int(id), host);
  }
}

}  // namespace mh::ckpt
