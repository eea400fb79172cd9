#include "layout.hpp"

#include <algorithm>

namespace mh::tuner {

Model Model::from(const MH_ModelShape& s) {
  Model m{s.layers, s.hidden, s.heads, s.ffn_hidden, s.seq_len, s.vocab, s.global_batch};
  if (s.struct_size < MH_STRUCT_SIZE(MH_ModelShape, untied_output)) return m;  // a 1.2 host: GPT-2's parts
  m.kv_heads = s.kv_heads;
  m.gated = s.gated_mlp != 0;
  m.untied = s.untied_output != 0;
  m.rotary = s.rotary != 0;
  if (s.struct_size >= MH_STRUCT_SIZE(MH_ModelShape, head_dim)) m.head_size = s.head_dim;  // 1.8
  if (s.struct_size < MH_STRUCT_SIZE(MH_ModelShape, flash_attention)) return m;  // a 2.0 host: no experts
  m.experts = s.experts;
  m.router_topk = s.router_topk;
  m.moe_ffn = s.moe_ffn_hidden > 0 ? s.moe_ffn_hidden : s.ffn_hidden;
  m.shared_experts = s.shared_experts;
  m.shared_ffn = s.shared_expert_ffn_hidden > 0 ? s.shared_expert_ffn_hidden : m.moe_ffn;
  m.flash = s.flash_attention != 0;
  return m;
}

Placement Placement::of(const Layout& l, int32_t devices_per_node, bool shared_device) {
  auto level = [&](int64_t span) { return span <= devices_per_node ? MH_LINK_INTRA_NODE : MH_LINK_INTER_NODE; };
  Placement out;
  out.tp_level = level(l.t);
  out.cp_level = level(int64_t(l.t) * l.cp);
  // ep consecutive ranks of the stage's tensor, context and data ranks.
  out.ep_level = level(l.ep);
  out.dp_level = level(int64_t(l.t) * l.cp * l.d);
  out.pp_level = level(int64_t(l.world()));
  out.sharing = shared_device ? std::min(l.world(), devices_per_node) : 1;
  return out;
}

Sharing Placement::busy_stages(int32_t stages, int32_t p) const {
  return Sharing{sharing, std::max(1, (sharing * stages + p - 1) / p)};
}

}  // namespace mh::tuner
