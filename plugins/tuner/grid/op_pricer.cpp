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
    : s(model.seq), h(model.hidden), V(model.vocab / l.t), n(model.seq * l.b), nl(l.sp ? n / l.t : n),
      hl(model.attention_width() / l.t), fl(model.ffn / l.t), g(int64_t(l.b) * model.heads / l.t),
      dh(model.head_dim()),
      ql(model.qkv() / l.t), f1l(model.fc1() / l.t), gated(model.gated), rotary(model.rotary), mc_(machine),
      l_(l), w_(w), sharing_(sharing), train_(train) {}

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
    gemm(g, s, s, dh);  // scores = Q K^T
    vec("softmax", g * s * s);
  }
  if (!have[kActAttnProbs] || !have[kActAttnMask]) dropout(g * s * s);
  if (!have[kActContext]) gemm(g, s, dh, s);  // context = P V
}

// out = residual + dropout(exit(in @ W^T) + bias)
void Pricer::residual_branch(int64_t width) {
  gemm(1, n, h, width);
  exit_fwd();
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
  if (gated) traffic(double(n * fl), 3);  // gate and up in, product out
  else vec("gelu", n * fl);
}

void Pricer::layer_forward(const LayerKeep& have, bool need_output) {
  if (!have[kActLn1]) vec("layernorm", nl * h);
  attention_forward(have);
  if (!have[kActResidual1] || !have[kActAttnDropMask]) residual_branch(hl);
  if (!have[kActLn2]) vec("layernorm", nl * h);
  if (!have[kActFc1]) {
    enter_fwd();
    gemm(1, n, f1l, h);
    vec("bias_add", n * f1l);
  }
  if (!have[kActGelu]) activation_forward();
  if (need_output || !have[kActMlpDropMask]) residual_branch(fl);
}

// dW and dx of y = x @ W^T with W [out, in]; with SP the input is gathered
// again for dW, since only its shard was kept.
void Pricer::linear_backward(int64_t in, int64_t out, bool regather) {
  if (regather) enter_fwd();
  gemm(1, out, in, n);  // dW += dy^T x
  gemm(1, n, in, out);  // dx = dy W
}

void Pricer::residual_branch_backward() {
  vec("dropout_bwd", nl * h);
  vec("bias_bwd", nl * h);
  exit_bwd();
}

void Pricer::layer_backward() {
  residual_branch_backward();
  linear_backward(fl, h, false);
  if (gated) traffic(double(n * fl), 5);  // gate, up and dout in; both gradients out
  else vec("gelu_bwd", n * fl);
  vec("bias_bwd", n * f1l);
  linear_backward(h, f1l, true);
  enter_bwd();
  vec("layernorm_bwd", nl * h);
  residual_branch_backward();
  linear_backward(hl, h, false);
  gemm(g, s, s, dh);  // dP = dC V^T
  gemm(g, s, dh, s);  // dV = P^T dC
  vec("dropout_bwd", g * s * s);
  vec("softmax_bwd", g * s * s);
  gemm(g, s, dh, s);  // dQ = dS K
  gemm(g, s, dh, s);  // dK = dS^T Q
  rope();
  vec("bias_bwd", n * ql);
  linear_backward(h, ql, true);
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
  linear_backward(h, V, true);
  enter_bwd();
  vec("elementwise", nl * h);
  vec("layernorm_bwd", nl * h);
}

}  // namespace mh::tuner
