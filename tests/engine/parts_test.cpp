// Each part a layer is assembled from, alone, against a reference written
// from its definition: forward against the formula evaluated in double on
// the host, backward against central differences of that double reference.
//
// Tolerances. The parts compute in f32 with f32 accumulation over at most
// K = 24 terms (the MLP's width; h = 16, head_dim = 4) of magnitude below
// 4, so by the standard bound (Higham, Accuracy and Stability, 3.1) each
// result is off by at most K * 2^-24 * K * 4 ~ 1.4e-4 before the few
// elementwise steps after it (normalisation, exp, tanh: a relative 2^-22
// each; the cpu kernels' fast tanh adds 2e-7 absolute). 5e-4 absolute plus
// 1e-4 relative therefore holds on any CPU, while a part that read the
// wrong element, head or transpose is off by O(1). The double reference's
// central differences with eps = 1e-5 are exact to ~1e-10 (truncation
// eps^2 f''' / 6, rounding 1e-16 / eps), far inside that.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <vector>

#include "engine/activations.hpp"
#include "engine/kv_cache.hpp"
#include "engine/layer.hpp"
#include "engine/ops.hpp"
#include "engine/parts/attention.hpp"
#include "engine/parts/cached_attention.hpp"
#include "engine/parts/layer_parts.hpp"
#include "support/single_rank_engine.hpp"

namespace mh {
namespace {

using Vec = std::vector<double>;
constexpr double kAbs = 5e-4, kRel = 1e-4;

ModelSpec spec(Norm norm, Position position, MlpActivation activation, bool bias) {
  ModelSpec s;
  s.norm = norm;
  s.position = position;
  s.activation = activation;
  s.bias = bias;
  return s;
}

ModelDims tiny(const ModelSpec& s, int64_t kv_heads = 0) {
  ModelDims d{};
  d.spec = s;
  d.layers = 1;
  d.hidden = 16;
  d.heads = 4;
  d.kv_heads = kv_heads;
  d.ffn = 24;
  d.seq = 6;
  d.micro_batch = 1;
  d.vocab = 32;
  d.init_std = 0.3f;
  return d;
}

Vec random(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> u(-1, 1);
  Vec v(n);
  for (double& x : v) x = u(gen);
  return v;
}
std::vector<float> f32(const Vec& v) { return std::vector<float>(v.begin(), v.end()); }

double dot(const Vec& a, const Vec& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
  return s;
}

// d loss / d at, by central differences in double.
Vec numeric_grad(const std::function<double(const Vec&)>& loss, Vec at) {
  constexpr double eps = 1e-5;
  Vec g(at.size());
  for (size_t i = 0; i < at.size(); ++i) {
    const double v = at[i];
    at[i] = v + eps;
    const double up = loss(at);
    at[i] = v - eps;
    g[i] = (up - loss(at)) / (2 * eps);
    at[i] = v;
  }
  return g;
}

void expect_close(const std::vector<float>& got, const Vec& want, const char* what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(got[i], want[i], kAbs + kRel * std::fabs(want[i])) << what << " element " << i;
}

// y [n, out] = x [n, in] W^T (+ b), W [out, in].
Vec linear(const Vec& x, const Vec& W, const Vec* b, int64_t n, int64_t in, int64_t out) {
  Vec y(size_t(n * out));
  for (int64_t r = 0; r < n; ++r)
    for (int64_t o = 0; o < out; ++o) {
      double s = b != nullptr ? (*b)[size_t(o)] : 0;
      for (int64_t i = 0; i < in; ++i) s += x[size_t(r * in + i)] * W[size_t(o * in + i)];
      y[size_t(r * out + o)] = s;
    }
  return y;
}

// A part's test bench: one rank with the model's parameters, whose values
// the test sets so that every weight and bias is a random O(1) number.
struct Bench {
  explicit Bench(const ModelDims& dims)
      : d(dims), env("[model]\nlayers = 1\n"), rank(env, d), ctx{rank.dev, rank.params, rank.tp, d},
        parts(build_layer_parts(ctx)) {
    ops::fill(rank.dev, rank.params.grads().f32(), rank.params.numel(), 0);
  }
  // Sets parameter id (when the spec has it) to random values; returns them.
  Vec set(int id, uint32_t seed) {
    if (id < 0) return {};
    const Vec v = random(size_t(rank.params.info(id).numel()), seed);
    rank.dev.to_device(rank.params.weight(id).data, f32(v).data(), v.size() * 4);
    return v;
  }
  std::vector<float> grad(int id) { return rank.grad(id); }
  const LayerParamIds& w() const { return rank.params.layer(0); }

  ModelDims d;
  test::EngineEnv env;
  test::SingleRankEngine rank;
  PartContext ctx;
  LayerParts parts;
};

// ---- norms ----------------------------------------------------------------

Vec norm_reference(const ModelDims& d, const Vec& x, const Vec& w, const Vec& b) {
  const int64_t n = d.rows(), h = d.hidden;
  Vec y(x.size());
  for (int64_t r = 0; r < n; ++r) {
    const double* row = &x[size_t(r * h)];
    double mean = 0, square = 0;
    for (int64_t j = 0; j < h; ++j) mean += row[j] / double(h);
    const double centre = d.spec.norm == Norm::kLayerNorm ? mean : 0;
    for (int64_t j = 0; j < h; ++j) square += (row[j] - centre) * (row[j] - centre) / double(h);
    const double rstd = 1 / std::sqrt(square + d.layernorm_eps);
    for (int64_t j = 0; j < h; ++j)
      y[size_t(r * h + j)] = (row[j] - centre) * rstd * w[size_t(j)] + (b.empty() ? 0 : b[size_t(j)]);
  }
  return y;
}

class NormParts : public ::testing::TestWithParam<Norm> {};

TEST_P(NormParts, ForwardIsTheDefinitionAndBackwardItsDerivative) {
  Bench t(tiny(spec(GetParam(), Position::kLearned, MlpActivation::kGelu, true)));
  const int64_t n = t.d.rows(), h = t.d.hidden;
  const Vec w = t.set(t.w().ln1_w, 1), b = t.set(t.w().ln1_b, 2), x = random(size_t(n * h), 3),
            r = random(size_t(n * h), 4);
  Buffer xb = t.rank.upload(f32(x)), dout = t.rank.upload(f32(r)), dx = t.rank.upload(std::vector<float>(x.size()));
  const Buffer out = t.parts.norm->forward(xb.ptr(), t.w().ln1_w, t.w().ln1_b);
  expect_close(t.rank.download(out.ptr(), n * h), norm_reference(t.d, x, w, b), "forward");

  t.parts.norm->backward(dout.ptr(), xb.ptr(), out, t.w().ln1_w, t.w().ln1_b, dx.f32());
  auto loss = [&](const Vec& xv, const Vec& wv, const Vec& bv) { return dot(norm_reference(t.d, xv, wv, bv), r); };
  expect_close(t.rank.download(dx.ptr(), n * h), numeric_grad([&](const Vec& v) { return loss(v, w, b); }, x), "dx");
  expect_close(t.grad(t.w().ln1_w), numeric_grad([&](const Vec& v) { return loss(x, v, b); }, w), "dw");
  if (t.w().ln1_b >= 0)
    expect_close(t.grad(t.w().ln1_b), numeric_grad([&](const Vec& v) { return loss(x, w, v); }, b), "db");
}

INSTANTIATE_TEST_SUITE_P(Norms, NormParts, ::testing::Values(Norm::kLayerNorm, Norm::kRmsNorm),
                         [](const auto& info) { return info.param == Norm::kLayerNorm ? "layernorm" : "rmsnorm"; });

// ---- MLP ------------------------------------------------------------------

double gelu(double v) { return 0.5 * v * (1 + std::tanh(std::sqrt(2 / M_PI) * (v + 0.044715 * v * v * v))); }
double silu(double v) { return v / (1 + std::exp(-v)); }

struct MlpWeights {
  Vec fc1_w, fc1_b, gate_w, gate_b;
};

Vec mlp_reference(const ModelDims& d, const Vec& x, const MlpWeights& m) {
  const int64_t n = d.rows(), h = d.hidden, f = d.ffn;
  const Vec up = linear(x, m.fc1_w, m.fc1_b.empty() ? nullptr : &m.fc1_b, n, h, f);
  Vec act(up.size());
  if (d.spec.activation == MlpActivation::kGelu) {
    for (size_t i = 0; i < up.size(); ++i) act[i] = gelu(up[i]);
    return act;
  }
  const Vec gate = linear(x, m.gate_w, m.gate_b.empty() ? nullptr : &m.gate_b, n, h, f);
  for (size_t i = 0; i < up.size(); ++i) act[i] = silu(gate[i]) * up[i];
  return act;
}

struct MlpCase {
  const char* name;
  MlpActivation activation;
  bool bias;
};

class MlpParts : public ::testing::TestWithParam<MlpCase> {};

TEST_P(MlpParts, ForwardIsTheDefinitionAndBackwardItsDerivative) {
  Bench t(tiny(spec(Norm::kLayerNorm, Position::kLearned, GetParam().activation, GetParam().bias)));
  const int64_t n = t.d.rows(), h = t.d.hidden, f = t.d.ffn;
  const LayerParamIds& w = t.w();
  const MlpWeights m{t.set(w.fc1_w, 1), t.set(w.fc1_b, 2), t.set(w.gate_w, 3), t.set(w.gate_b, 4)};
  const Vec x = random(size_t(n * h), 5), r = random(size_t(n * f), 6);
  LayerActivations A;
  A[kActLn2] = t.rank.upload(f32(x), MemCategory::kActivations);
  t.parts.mlp->forward(A, w, LayerPass{}, LoraDropout{});
  expect_close(t.rank.download(A[kActGelu].ptr(), n * f), mlp_reference(t.d, x, m), "forward");

  Buffer dact = t.rank.upload(f32(r)), dx = t.rank.upload(std::vector<float>(x.size()));
  t.parts.mlp->backward(A, w, LoraDropout{}, dact, dx);
  auto loss_with = [&](auto change) {
    return [&, change](const Vec& v) {
      MlpWeights changed = m;
      Vec xv = x;
      change(changed, xv, v);
      return dot(mlp_reference(t.d, xv, changed), r);
    };
  };
  expect_close(t.rank.download(dx.ptr(), n * h),
               numeric_grad(loss_with([](MlpWeights&, Vec& xv, const Vec& v) { xv = v; }), x), "dx");
  expect_close(t.grad(w.fc1_w),
               numeric_grad(loss_with([](MlpWeights& c, Vec&, const Vec& v) { c.fc1_w = v; }), m.fc1_w), "dW1");
  if (w.fc1_b >= 0)
    expect_close(t.grad(w.fc1_b),
                 numeric_grad(loss_with([](MlpWeights& c, Vec&, const Vec& v) { c.fc1_b = v; }), m.fc1_b), "db1");
  if (w.gate_w >= 0)
    expect_close(t.grad(w.gate_w),
                 numeric_grad(loss_with([](MlpWeights& c, Vec&, const Vec& v) { c.gate_w = v; }), m.gate_w), "dWg");
  if (w.gate_b >= 0)
    expect_close(t.grad(w.gate_b),
                 numeric_grad(loss_with([](MlpWeights& c, Vec&, const Vec& v) { c.gate_b = v; }), m.gate_b), "dbg");
}

INSTANTIATE_TEST_SUITE_P(Activations, MlpParts,
                         ::testing::Values(MlpCase{"gelu_bias", MlpActivation::kGelu, true},
                                           MlpCase{"gelu", MlpActivation::kGelu, false},
                                           MlpCase{"swiglu_bias", MlpActivation::kSwiglu, true},
                                           MlpCase{"swiglu", MlpActivation::kSwiglu, false}),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- position encodings -----------------------------------------------------

// Rotate-half RoPE of one head vector at position p.
void rope_reference(double* v, int64_t D, double p, double theta) {
  for (int64_t i = 0; i < D / 2; ++i) {
    const double angle = p * std::pow(theta, -2.0 * double(i) / double(D));
    const double a = v[i], b = v[i + D / 2];
    v[i] = a * std::cos(angle) - b * std::sin(angle);
    v[i + D / 2] = b * std::cos(angle) + a * std::sin(angle);
  }
}

TEST(PositionParts, RotaryRotatesEachPairByItsPositionAndTheInverseUndoesIt) {
  Bench t(tiny(spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false)));
  constexpr int64_t kBatch = 2, kRows = 5, kD = 4, kFirst = 3;
  const Vec x = random(size_t(kBatch * kRows * kD), 1);
  Buffer heads = t.rank.upload(f32(x));
  t.parts.position->encode(heads.t({kBatch, kRows, kD}), kFirst, MH_Tensor{}, false);
  Vec want = x;
  for (int64_t b = 0; b < kBatch; ++b)
    for (int64_t r = 0; r < kRows; ++r) rope_reference(&want[size_t((b * kRows + r) * kD)], kD, double(kFirst + r), t.d.spec.rope_theta);
  expect_close(t.rank.download(heads.ptr(), kBatch * kRows * kD), want, "rotated");
  t.parts.position->encode(heads.t({kBatch, kRows, kD}), kFirst, MH_Tensor{}, true);
  expect_close(t.rank.download(heads.ptr(), kBatch * kRows * kD), x, "rotated back");
}

TEST(PositionParts, LearnedPositionsLeaveAttentionsHeadsAsTheyAre) {
  Bench t(tiny(spec(Norm::kLayerNorm, Position::kLearned, MlpActivation::kGelu, true)));
  const Vec x = random(40, 1);
  Buffer heads = t.rank.upload(f32(x));
  t.parts.position->encode(heads.t({2, 5, 4}), 3, MH_Tensor{}, false);
  expect_close(t.rank.download(heads.ptr(), 40), x, "heads");
}

// ---- attention --------------------------------------------------------------

// Causal attention of rows [0, n) at positions 0.. over the QKV layout of
// attention.hpp: the context [n, a * D], head (g, i) at column (g m + i) D.
Vec attention_reference(const ModelDims& d, const Vec& x, const Vec& W, const Vec& b, int64_t n) {
  const int64_t h = d.hidden, D = d.head_dim(), k = d.kv(), m = d.heads / k, q = d.local_qkv();
  Vec qkv = linear(x, W, b.empty() ? nullptr : &b, n, h, q);
  if (d.spec.position == Position::kRope)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t g = 0; g < k; ++g)
        for (int64_t j = 0; j <= m; ++j) rope_reference(&qkv[size_t(r * q + (g * (m + 2) + j) * D)], D, double(r), d.spec.rope_theta);
  Vec ctx(size_t(n * d.hidden), 0);
  for (int64_t g = 0; g < k; ++g)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r) {
        const double* qv = &qkv[size_t(r * q + (g * (m + 2) + i) * D)];
        Vec p(size_t(r + 1));
        double top = -1e300, sum = 0;
        for (int64_t s = 0; s <= r; ++s) {
          const double* kv = &qkv[size_t(s * q + (g * (m + 2) + m) * D)];
          double dotp = 0;
          for (int64_t e = 0; e < D; ++e) dotp += qv[e] * kv[e];
          p[size_t(s)] = dotp / std::sqrt(double(D));
          top = std::max(top, p[size_t(s)]);
        }
        for (double& v : p) sum += (v = std::exp(v - top));
        for (int64_t s = 0; s <= r; ++s) {
          const double* vv = &qkv[size_t(s * q + (g * (m + 2) + m + 1) * D)];
          for (int64_t e = 0; e < D; ++e) ctx[size_t(r * h + (g * m + i) * D + e)] += p[size_t(s)] / sum * vv[e];
        }
      }
  return ctx;
}

struct AttentionCase {
  const char* name;
  ModelSpec spec;
  int64_t kv_heads;
};

const AttentionCase kAttentionCases[] = {
    {"mha_learned_bias", spec(Norm::kLayerNorm, Position::kLearned, MlpActivation::kGelu, true), 4},
    {"gqa_rope", spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false), 2},
    {"mqa_rope_bias", spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, true), 1},
};

class AttentionParts : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionParts, FullCoreIsCausalAttentionAndBackwardItsDerivative) {
  Bench t(tiny(GetParam().spec, GetParam().kv_heads));
  const int64_t n = t.d.rows(), h = t.d.hidden;
  const LayerParamIds& w = t.w();
  const Vec W = t.set(w.qkv_w, 1), b = t.set(w.qkv_b, 2), x = random(size_t(n * h), 3), r = random(size_t(n * h), 4);
  const AttentionPart attention(t.ctx, *t.parts.position);
  LayerActivations A;
  A[kActLn1] = t.rank.upload(f32(x), MemCategory::kActivations);
  attention.forward(A, w, 0, LayerPass{});
  expect_close(t.rank.download(A[kActContext].ptr(), n * h), attention_reference(t.d, x, W, b, n), "context");

  Buffer dctx = t.rank.upload(f32(r)), dx = t.rank.upload(std::vector<float>(x.size()));
  attention.backward(A, w, 0, LayerPass{}, dctx.ptr(), dx);
  auto loss = [&](const Vec& xv, const Vec& Wv, const Vec& bv) { return dot(attention_reference(t.d, xv, Wv, bv, n), r); };
  expect_close(t.rank.download(dx.ptr(), n * h), numeric_grad([&](const Vec& v) { return loss(v, W, b); }, x), "dx");
  expect_close(t.grad(w.qkv_w), numeric_grad([&](const Vec& v) { return loss(x, v, b); }, W), "dW");
  if (w.qkv_b >= 0) expect_close(t.grad(w.qkv_b), numeric_grad([&](const Vec& v) { return loss(x, W, v); }, b), "db");
}

// The cached core over a prompt, then over one more row at a time, gives
// each row the context causal attention over the whole sequence gives it.
TEST_P(AttentionParts, CachedCoreGivesThePrefillAndEachDecodedRowTheFullContext) {
  Bench t(tiny(GetParam().spec, GetParam().kv_heads));
  const int64_t n = t.d.rows(), h = t.d.hidden, prompt = 3;
  const LayerParamIds& w = t.w();
  const Vec W = t.set(w.qkv_w, 1), b = t.set(w.qkv_b, 2), x = random(size_t(n * h), 3);
  const Vec want = attention_reference(t.d, x, W, b, n);
  const int64_t layers[] = {0};
  KvCache cache(t.rank.dev, t.d, layers, 1, n);
  for (int64_t past = 0; past < n;) {
    const int64_t count = past == 0 ? prompt : 1;
    ModelDims rows = t.d;
    rows.seq = count;
    TensorParallel tp(t.rank.dev, t.rank.world, t.rank.plan, rows);
    const PartContext ctx{t.rank.dev, t.rank.params, tp, rows};
    const SequenceRows seq[] = {{0, 0, count, past}};
    LayerActivations A;
    A[kActLn1] = t.rank.upload(f32(Vec(x.begin() + past * h, x.begin() + (past + count) * h)));
    CachedAttention(ctx, *t.parts.position, cache, seq).forward(A, w, 0, LayerPass{0, 0, 0, 0, true});
    expect_close(t.rank.download(A[kActContext].ptr(), count * h),
                 Vec(want.begin() + past * h, want.begin() + (past + count) * h), "context");
    past += count;
  }
}

INSTANTIATE_TEST_SUITE_P(Heads, AttentionParts, ::testing::ValuesIn(kAttentionCases),
                         [](const auto& info) { return std::string(info.param.name); });

// ---- the layer skeleton ------------------------------------------------------

// Inference runs the same layer as evaluation, keeping nothing for a
// backward: the same output, and every activation released.
void check_inference_pass(const ModelDims& d) {
  Bench t(d);
  const int64_t n = t.d.rows(), h = t.d.hidden;
  const Vec x = random(size_t(n * h), 1);
  const AttentionPart attention(t.ctx, *t.parts.position);
  const DecoderLayer layer(t.ctx, t.parts, attention);
  std::vector<float> outputs[2];
  for (bool inference : {false, true}) {
    LayerActivations A;
    A[kActLayerInput] = t.rank.upload(f32(x), MemCategory::kActivations);
    Buffer out;
    layer.forward(A, 0, LayerPass{0, 0, 0, 0, inference}, &out);
    outputs[inference] = t.rank.download(out.ptr(), n * h);
    for (int a = 0; a < kActCount; ++a)
      EXPECT_EQ(A.has(Activation(a)), !inference) << "activation " << a << (inference ? " kept" : " missing");
  }
  EXPECT_EQ(outputs[0], outputs[1]);
}

TEST(DecoderLayerSkeleton, AnInferencePassComputesTheEvaluationPassesOutputAndKeepsNothing) {
  check_inference_pass(tiny(spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, true), 2));
}

// Qwen2-MoE's layer: the shared expert's gate, read at the output
// projection, outlives the norm output inference releases before it.
TEST(DecoderLayerSkeleton, AnInferencePassOfAMixtureWithAGatedSharedExpertIsTheEvaluationPass) {
  ModelDims d = tiny(spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false), 2);
  d.spec.qkv_bias = true;
  d.spec.experts = 4;
  d.spec.router_topk = 2;
  d.spec.shared_experts = 1;
  d.spec.shared_expert_gate = true;
  d.spec.capacity_factor = 1;
  d.moe_ffn = 12;
  d.shared_ffn = 20;
  check_inference_pass(d);
}

}  // namespace
}  // namespace mh
