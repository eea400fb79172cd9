// The mixture-of-experts MLP (docs/models.md), the part the specification
// chooses when model.experts > 0: a router (a linear layer without bias)
// gives each row a softmax over the experts; the row goes to its top k,
// weighted by their probabilities (renormalised over the k under
// router_norm_topk, as Mixtral), every row to all of its k experts
// (dropless), or under moe_capacity_factor each expert to at most
// ceil(factor rows k / E) of them: an expert's choices beyond that are
// dropped, the lowest gate first (the later row on a tie), and contribute
// nothing. Each expert is a SwiGLU MLP of width moe_ffn. The shared experts,
// where the specification has them, are a part of their own
// (shared_expert.hpp) whose output joins the routed experts'.
//
// The routed copies of the rows are sorted by expert into rows*k slots, so
// each expert's rows are one contiguous block and the expert GEMMs are one
// GEMM per expert over its block. Dispatch is a row gather (the embedding
// op over the norm output as the table), combine a scatter-add (its
// backward) of the weighted expert outputs; the routing itself (softmax,
// top-k, the slots) runs on the host from the router's logits. FC1 and the
// activation output hold the slots' rows: [rows k, 2 moe_ffn] and
// [rows k, moe_ffn] (under a capacity the first offset[E] of them are in
// use), then the shared experts' [rows, 2 Fs] and [rows, Fs].
//
// With expert parallelism (parallel.expert.size = ep) the rank holds
// experts E / ep of them: after routing, each rank's slots go by all-to-all
// to the rank of their expert (the counts per expert first), the rank runs
// its experts' GEMMs over what it received, and the outputs return the same
// way before the combine; backward mirrors it. Routing and the
// load-balancing loss stay the rank's own micro-batch's, as on one rank.
//
// Under tensor parallelism (with sequence parallelism, as Megatron-Core's
// expert tensor-parallel size 1) the mixture sits outside the tensor
// regions: it routes the rank's own sequence shard, the norm's output as it
// is, with whole experts, and its output is the shard's rows, which the
// residual branch adds without a tensor-parallel exit (tensor_region).
// The router and the shared experts are replicated over the tensor group,
// their gradients summed over it as the norms' are.
//
// The load-balancing loss of Switch and Mixtral, coef E sum_e f_e P_e with
// f_e the rows routed to expert e over the rows (summing to k) and P_e the
// mean router probability of e (f counts the router's choices, those a
// capacity drops included), is added to the objective with the pass's
// aux_weight and reported on its own (moe_aux_loss). Under context and
// sequence parallelism f and P are the micro-batch's, summed over the
// sequence group (PartContext::sequence: its ranks hold parts of the same
// sequences), so each rank of it holds the whole loss; a capacity, decided
// per rank, is refused there.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/parts/mlp.hpp"
#include "engine/parts/shared_expert.hpp"

namespace mh {

// Why a mixture of experts cannot train on t tensor ranks, or empty: it
// routes each rank's own rows with whole experts, which under tensor
// parallelism must be the rank's sequence shard (Megatron-Core asserts
// sequence parallelism too). Generation holds every row on each tensor
// rank and runs the whole mixture there.
std::string moe_tensor_layout_problem(const ModelDims& d, int32_t tp, bool sequence_parallel, bool generates);

class MoeMlpPart final : public MlpPart {
 public:
  // `shared`: the shared experts, null without them.
  MoeMlpPart(const PartContext& c, std::unique_ptr<SharedExpertPart> shared);

  // The experts carry no adapters: `drop` is not read.
  void forward(LayerActivations& A, const LayerParamIds& w, const LayerPass& pass,
               const LoraDropout& drop) const override;
  void output(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, float* partial) const override;
  Buffer output_bwd(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, TypedPtr dy) const override;
  void backward(LayerActivations& A, const LayerParamIds& w, const LoraDropout& drop, Buffer& dact,
                Buffer& dx) const override;
  bool tensor_region() const override { return false; }

 private:
  // A.routing from the router's logits of the norm output `in`.
  void route(LayerActivations& A, const LayerParamIds& w, TypedPtr in, const LayerPass& pass) const;
  // r's exchange over the expert group: rows to and from each rank, and
  // the received rows' order by local expert.
  void plan_exchange(MoeRouting& r, bool inference) const;
  // Sums `load` and `prob_sum` (each expert's router probabilities summed
  // over the rows) over the sequence group.
  void sum_over_sequence(std::vector<int64_t>& load, std::vector<double>& prob_sum) const;
  // Each expert's choices past its capacity, the lowest gate first: their
  // slot becomes -1.
  void drop_overflow(MoeRouting& r) const;
  // Slots [rows k, h]: the row of each slot in use, gathered from `in`.
  Buffer dispatch(const MoeRouting& r, TypedPtr in) const;
  // The local experts' rows [received, h] of slots [rows k, h], in `held`
  // unless there is one rank (then the slots themselves).
  TypedPtr to_experts(const MoeRouting& r, TypedPtr slots, Buffer& held) const;
  // Slots [rows k, h] of the local experts' rows [received, h], likewise.
  TypedPtr from_experts(const MoeRouting& r, TypedPtr rows, Buffer& held) const;
  // y [received, h] = each local expert's FC2 of its rows' activation output.
  Buffer expert_output(const MoeRouting& r, TypedPtr act, const LayerParamIds& w) const;
  // out [rows k, h] = x scaled row by row by the slots' gates.
  Buffer gated(const MoeRouting& r, TypedPtr x) const;
  // The router logits' gradient [rows, E] from the gates' and the
  // load-balancing loss's, on the host.
  std::vector<float> router_grad(const MoeRouting& r) const;
  int64_t E() const { return c_.d.spec.experts; }
  int64_t k() const { return c_.d.spec.router_topk; }
  int64_t F() const { return c_.d.moe_ffn; }
  int64_t local_experts() const { return c_.d.local_experts(); }
  int64_t Fs() const { return shared_ ? shared_->width() : 0; }

  std::unique_ptr<SharedExpertPart> shared_;
};

}  // namespace mh
