#include "op_pricer.hpp"

#include <algorithm>
#include <utility>

namespace mh::tuner {

Seconds& Seconds::operator+=(const Seconds& o) {
  gemm += o.gemm;
  vector += o.vector;
  comm += o.comm;
  return *this;
}

Seconds Seconds::operator*(double k) const { return Seconds{gemm * k, vector * k, comm * k}; }

Pricer::Pricer(const Machine& machine, const Model& model, const Layout& l, const Placement& w, Sharing sharing,
               bool train)
    : s(model.seq), h(model.hidden), V(model.vocab / l.t), n(model.seq / l.cp * l.b), nl(l.sp ? n / l.t : n),
      hl(model.attention_width() / l.t), fl(model.moe() ? model.ffn : model.ffn / l.t),
      g(int64_t(l.b) * model.heads / l.t), dh(model.head_dim()), ql(model.qkv() / l.t),
      f1l(model.moe() ? model.fc1() : model.fc1() / l.t), nm(model.moe() && train ? nl : n),
      // Each rank's share of the causal scores is 1/cp under load balancing:
      // Ulysses holds every row of 1/cp of the heads; all-gather the rank's
      // s / cp query rows against every key; the ring cp blocks of s / cp.
      ga(l.cp_comm == "a2a" ? g / l.cp : l.cp_comm == "p2p" ? g * l.cp : g), sq(l.cp_comm == "a2a" ? s : s / l.cp),
      sk(l.cp_comm == "p2p" ? s / l.cp : s), gated(model.gated),
      rotary(model.rotary), mc_(machine), m_(model), l_(l), w_(w), sharing_(sharing), train_(train) {}

Seconds Pricer::take() { return std::exchange(out_, Seconds{}); }

// Each op is one kernels call, and each call costs the profile's fixed
// cost of a call on top of its work.
void Pricer::gemm(int64_t batch, int64_t m, int64_t nn, int64_t k) {
  double seconds = mc_.gemm_seconds(batch, m, nn, k, sharing_);
  if (working_set_ > 0)
    seconds = std::max(seconds, mc_.working_set_seconds(act(batch * nn * k), working_set_, sharing_));
  out_.gemm += seconds + mc_.call_seconds(sharing_);
}
void Pricer::vec(const char* op, int64_t elements) {
  out_.vector += mc_.vector_seconds(op, double(elements), sharing_) + mc_.call_seconds(sharing_);
}
void Pricer::dropout(int64_t elements) {
  if (train_) vec("dropout", elements);
}
void Pricer::tp(Coll op, double bytes) { out_.comm += mc_.collective_seconds(op, bytes, l_.t, w_.tp_level); }
double Pricer::act(int64_t elements) const { return double(elements) * mc_.element_bytes(); }

// The region boundaries of Megatron's tensor plan (MH_TensorPlan): entering
// a column-parallel block gathers the sequence shards with SP; leaving a
// row-parallel block reduce-scatters with SP and all-reduces without; each
// backward is the conjugate.
void Pricer::enter_fwd() {
  if (l_.sp) tp(Coll::kAllGather, act(n * h));
}
void Pricer::enter_bwd() { tp(l_.sp ? Coll::kReduceScatter : Coll::kAllReduce, act(n * h)); }
void Pricer::exit_fwd() { tp(l_.sp ? Coll::kReduceScatter : Coll::kAllReduce, act(n * h)); }
void Pricer::exit_bwd() {
  if (l_.sp) tp(Coll::kAllGather, act(n * h));
}

// QKV, scores, their dropout and the context, each only when missing.
void Pricer::attention_forward(const LayerKeep& have) {
  if (!have[kActQkv]) {
    enter_fwd();
    gemm(1, n, ql, h);
    vec("bias_add", n * ql);
    rope();
  }
  if (!have[kActAttnScores]) {
    context_forward_in();
    gemm(ga, sq, sk, dh);  // scores = Q K^T
    vec("softmax", ga * sq * sk);
  }
  if (!have[kActAttnProbs] || !have[kActAttnMask]) dropout(ga * sq * sk);
  if (!have[kActContext]) {
    gemm(ga, sq, dh, sk);  // context = P V
    context_forward_out();
  }
}

// An all-to-all of a rank's `bytes` over `ranks`.
void Pricer::all_to_all(double bytes, int32_t ranks, int32_t level) {
  out_.comm += mc_.collective_seconds(Coll::kAllToAll, bytes, ranks, level);
}

// The local key/value block: K and V of the rank's n rows.
void Pricer::context_forward_in() {
  if (l_.cp <= 1) return;
  const double kv = act(n * (ql - hl));
  if (l_.cp_comm == "all_gather") {
    out_.comm += mc_.collective_seconds(Coll::kAllGather, kv * l_.cp, l_.cp, w_.cp_level);
  } else if (l_.cp_comm == "p2p") {
    // The ring passes the block cp - 1 times, one step after another.
    out_.comm += double(l_.cp - 1) * mc_.collective_seconds(Coll::kSendRecv, kv, 2, w_.cp_level);
  } else {
    all_to_all(act(n * hl), l_.cp, w_.cp_level);  // Q, K and V: each head's rows to its rank
    all_to_all(kv / 2, l_.cp, w_.cp_level);
    all_to_all(kv / 2, l_.cp, w_.cp_level);
  }
}

void Pricer::context_forward_out() {
  if (l_.cp > 1 && l_.cp_comm == "a2a") all_to_all(act(n * hl), l_.cp, w_.cp_level);  // the context back
}

// The conjugates: the K/V gradients reduce-scattered; the ring's blocks
// passed again (cp - 1 steps) with their gradients (cp steps home); the
// four all-to-alls reversed.
void Pricer::context_backward() {
  if (l_.cp <= 1) return;
  const double kv = act(n * (ql - hl));
  if (l_.cp_comm == "all_gather") {
    out_.comm += mc_.collective_seconds(Coll::kReduceScatter, kv * l_.cp, l_.cp, w_.cp_level);
  } else if (l_.cp_comm == "p2p") {
    out_.comm += double(2 * l_.cp - 1) * mc_.collective_seconds(Coll::kSendRecv, kv, 2, w_.cp_level);
  } else {
    all_to_all(act(n * hl), l_.cp, w_.cp_level);
    all_to_all(act(n * hl), l_.cp, w_.cp_level);
    all_to_all(kv / 2, l_.cp, w_.cp_level);
    all_to_all(kv / 2, l_.cp, w_.cp_level);
  }
}

// logits [n, E] = x W_r^T
void Pricer::router_forward() {
  if (m_.moe()) gemm(1, nm, m_.experts, h);
}
void Pricer::router_backward() {
  if (!m_.moe()) return;
  gemm(1, m_.experts, h, nm);  // dW_r
  gemm(1, nm, h, m_.experts);  // dx
}

// The rank's nm k routed rows [nm k, h] to the ranks of their experts (or
// back); the expert GEMMs themselves are FC1 and FC2 at the active width,
// the same FLOPs as each expert's over its rows.
void Pricer::expert_exchange() {
  if (m_.moe()) all_to_all(act(nm * m_.router_topk * h), l_.ep, w_.ep_level);
}

// out = residual + dropout(exit(in @ W^T) + bias)
void Pricer::residual_branch(int64_t rows, int64_t width, bool region) {
  gemm(1, rows, h, width);
  if (region) exit_fwd();
  vec("bias_add", nl * h);
  dropout(nl * h);
}

void Pricer::traffic(double elements, double passes) {
  out_.vector += mc_.stream_seconds(elements * passes * mc_.element_bytes(), sharing_) + mc_.call_seconds(sharing_);
}

// Q (hl wide) and K ((ql - hl) / 2 wide) rotated in place, forward or back.
void Pricer::rope() {
  if (rotary) traffic(double(n) * double(hl + (ql - hl) / 2), 2);
}

void Pricer::activation_forward() {
  if (gated) traffic(double(nm * fl), 3);  // gate and up in, product out
  else vec("gelu", nm * fl);
}

void Pricer::layer_forward(const LayerKeep& have, bool need_output) {
  if (!have[kActLn1]) vec("layernorm", nl * h);
  attention_forward(have);
  if (!have[kActResidual1] || !have[kActAttnDropMask]) residual_branch(n, hl, true);
  if (!have[kActLn2]) vec("layernorm", nl * h);
  if (!have[kActFc1]) {
    if (!m_.moe()) enter_fwd();
    router_forward();
    expert_exchange();  // dispatch
    gemm(1, nm, f1l, h);
    vec("bias_add", nm * f1l);
  }
  if (!have[kActGelu]) activation_forward();
  if (need_output || !have[kActMlpDropMask]) {
    expert_exchange();  // combine
    residual_branch(nm, fl, !m_.moe());
  }
}

// dW and dx of y = x @ W^T with W [out, in]; with SP the input is gathered
// again for dW, since only its shard was kept.
void Pricer::linear_backward(int64_t rows, int64_t in, int64_t out, bool regather) {
  if (regather) enter_fwd();
  gemm(1, out, in, rows);  // dW += dy^T x
  gemm(1, rows, in, out);  // dx = dy W
}

void Pricer::residual_branch_backward(bool region) {
  vec("dropout_bwd", nl * h);
  vec("bias_bwd", nl * h);
  if (region) exit_bwd();
}

void Pricer::layer_backward() {
  const bool region = !m_.moe();
  residual_branch_backward(region);
  expert_exchange();  // the combine's conjugate
  linear_backward(nm, fl, h, false);
  if (gated) traffic(double(nm * fl), 5);  // gate, up and dout in; both gradients out
  else vec("gelu_bwd", nm * fl);
  vec("bias_bwd", nm * f1l);
  linear_backward(nm, h, f1l, region);
  expert_exchange();  // the dispatch's
  router_backward();
  if (region) enter_bwd();
  vec("layernorm_bwd", nl * h);
  residual_branch_backward(true);
  linear_backward(n, hl, h, false);
  gemm(ga, sq, sk, dh);  // dP = dC V^T
  gemm(ga, sk, dh, sq);  // dV = P^T dC
  vec("dropout_bwd", ga * sq * sk);
  vec("softmax_bwd", ga * sq * sk);
  gemm(ga, sq, dh, sk);  // dQ = dS K
  gemm(ga, sk, dh, sq);  // dK = dS^T Q
  context_backward();
  rope();
  vec("bias_bwd", n * ql);
  linear_backward(n, h, ql, true);
  enter_bwd();
  vec("layernorm_bwd", nl * h);
}

// Token and position embeddings and their dropout (first stage).
void Pricer::embedding_forward() {
  vec("embedding", n * h);
  exit_fwd();
  vec("embedding", nl * h);
  dropout(nl * h);
}

void Pricer::embedding_forward_backward() {
  embedding_forward();
  vec("dropout_bwd", nl * h);
  vec("embedding_bwd", nl * h);
  exit_bwd();
  vec("embedding_bwd", n * h);
}

// Final layernorm, tied output layer and vocabulary-parallel loss (last stage).
void Pricer::head_forward_backward() {
  vec("layernorm", nl * h);
  enter_fwd();
  gemm(1, n, V, h);
  vec("xent", n * V);
  vec("xent", n * V);
  if (l_.t > 1) tp(Coll::kAllReduce, 3.0 * double(n) * kFp32);
  vec("xent", n * V);
  linear_backward(n, h, V, true);
  enter_bwd();
  vec("elementwise", nl * h);
  vec("layernorm_bwd", nl * h);
}

}  // namespace mh::tuner
