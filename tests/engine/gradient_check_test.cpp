// The whole model's hand-written backward against central finite
// differences of its forward, for a sample of every parameter tensor, for
// each part a specification can choose (norm, position encoding, attention
// heads, MLP activation, biases, tied output, mixture of experts with its
// load-balancing loss, shared experts and token capacity).
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "engine/ops.hpp"
#include "engine/transformer.hpp"
#include "support/single_rank_engine.hpp"

namespace mh {
namespace {

ModelDims tiny_dims(const ModelSpec& spec, int64_t kv_heads, int64_t head_dim = 0) {
  ModelDims d{};
  d.spec = spec;
  d.kv_heads = kv_heads;
  d.head_size = head_dim;
  d.layers = 2;
  d.hidden = 16;
  d.heads = 4;
  d.ffn = 64;
  d.moe_ffn = 24;
  d.shared_ffn = 20;
  d.seq = 8;
  d.vocab = 32;
  d.vocab_size = 30;  // two padded ids, which the loss must ignore
  d.micro_batch = 2;
  d.dropout = 0;
  d.attention_dropout = 0;
  d.init_std = 0.2f;
  return d;
}

struct Model {
  Model(const test::EngineEnv& env, const ModelDims& d)
      : rank(env, d), dev(rank.dev), params(rank.params),
        model(dev, params, rank.tp, nullptr, d, ChunkSpec{0, d.layers, true, true}, KeepTable(size_t(d.layers), keep_all())) {}

  static std::array<bool, kActCount> keep_all() {
    std::array<bool, kActCount> k{};
    k.fill(true);
    return k;
  }

  test::SingleRankEngine rank;
  Device& dev;
  ParamSet& params;
  Transformer model;
};

MicroBatch batch(Device& dev, const ModelDims& d) {
  std::mt19937 gen(3);
  std::vector<int32_t> ids(size_t(d.rows())), targets(size_t(d.rows())), pos(size_t(d.rows()));
  for (int64_t r = 0; r < d.rows(); ++r) {
    ids[size_t(r)] = int32_t(gen() % d.real_vocab());
    targets[size_t(r)] = int32_t(gen() % d.real_vocab());
    pos[size_t(r)] = int32_t(r / d.micro_batch);
  }
  MicroBatch mb;
  mb.ids = Buffer(dev, MemCategory::kWorkspace, d.rows(), MH_I32);
  mb.targets = Buffer(dev, MemCategory::kWorkspace, d.rows(), MH_I32);
  mb.positions = Buffer(dev, MemCategory::kWorkspace, d.rows(), MH_I32);
  dev.to_device(mb.ids.data(), ids.data(), ids.size() * 4);
  dev.to_device(mb.targets.data(), targets.data(), targets.size() * 4);
  dev.to_device(mb.positions.data(), pos.data(), pos.size() * 4);
  return mb;
}

struct Variant {
  const char* name;
  ModelSpec spec;
  int64_t kv_heads;
  int64_t head_dim = 0;  // 0: hidden / heads
};

ModelSpec spec(Norm norm, Position position, MlpActivation activation, bool tie, bool bias) {
  ModelSpec s;
  s.norm = norm;
  s.position = position;
  s.activation = activation;
  s.tie_embeddings = tie;
  s.bias = bias;
  return s;
}

ModelSpec moe(bool norm_topk) {
  ModelSpec s = spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false, false);
  s.experts = 4;
  s.router_topk = 2;
  s.router_norm_topk = norm_topk;
  s.router_aux_loss_coef = 0.5f;
  return s;
}

// Qwen2-MoE's layer: QKV biases alone, softmax gates, one shared expert
// behind a sigmoid gate.
ModelSpec qwen2_moe() {
  ModelSpec s = moe(false);
  s.qkv_bias = true;
  s.shared_experts = 1;
  s.shared_expert_gate = true;
  return s;
}

ModelSpec moe_shared_ungated() {
  ModelSpec s = moe(true);
  s.shared_experts = 2;
  return s;
}

// Capacity ceil(0.5 * 16 rows * 2 / 4) = 4 slots of the 8 an even share
// would take: most experts drop choices.
ModelSpec moe_capacity() {
  ModelSpec s = moe(true);
  s.capacity_factor = 0.5f;
  return s;
}

// Qwen3-MoE's layer: QK-norm, renormalised top-k gates, no shared expert.
ModelSpec qwen3_moe() {
  ModelSpec s = moe(true);
  s.qk_norm = true;
  return s;
}

const Variant kVariants[] = {
    {"gpt2", spec(Norm::kLayerNorm, Position::kLearned, MlpActivation::kGelu, true, true), 4},
    {"llama_gqa", spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false, false), 2},
    {"llama_mqa", spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false, false), 1},
    {"swiglu_bias_untied", spec(Norm::kLayerNorm, Position::kLearned, MlpActivation::kSwiglu, false, true), 2},
    {"rmsnorm_rope_gelu_bias", spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kGelu, true, true), 4},
    {"moe_topk_renormalised", moe(true), 2},
    {"moe_topk_softmax", moe(false), 2},
    {"moe_qwen2_shared_gated_qkv_bias", qwen2_moe(), 2},
    {"moe_shared_ungated", moe_shared_ungated(), 2},
    {"moe_capacity", moe_capacity(), 2},
    {"moe_qwen3_qk_norm", qwen3_moe(), 2},
    {"llama_mqa_qk_norm", [] {
       ModelSpec s = spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false, false);
       s.qk_norm = true;
       return s;
     }(), 1},
    // Qwen3: QK-norm over 4 heads of 6 (a D = 24 against h = 16).
    {"qwen3_head_dim_qk_norm", [] {
       ModelSpec s = spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false, false);
       s.qk_norm = true;
       return s;
     }(), 2, 6},
};

class GradientCheck : public ::testing::TestWithParam<Variant> {};

TEST_P(GradientCheck, WholeModelBackwardMatchesFiniteDifferences) {
  test::EngineEnv env("[model]\nlayers = 2\n");
  ModelDims d = tiny_dims(GetParam().spec, GetParam().kv_heads, GetParam().head_dim);
  Model m(env, d);
  MicroBatch mb = batch(m.dev, d);
  const double scale = 1.0 / double(d.rows());
  ops::fill(m.dev, m.params.grads().f32(), m.params.numel(), 0);
  // The objective: the mean loss plus, under a mixture of experts, the
  // layers' load-balancing losses at weight 1.
  m.model.set_moe_aux_weight(1);
  ForwardState st;
  m.model.forward(st, mb, Buffer(), true);
  m.model.take_moe_aux();
  m.model.backward(st, mb, Buffer(), float(scale));
  std::vector<float> grads(size_t(m.params.numel())), values(grads.size());
  m.dev.to_host(grads.data(), m.params.grads().data(), grads.size() * 4);
  m.dev.to_host(values.data(), m.params.values().data(), values.size() * 4);

  std::mt19937 gen(11);
  const float eps = 1e-2f;
  for (const ParamInfo& p : m.params.infos()) {
    for (int sample = 0; sample < 4; ++sample) {
      const size_t i = size_t(p.offset) + size_t(gen() % uint64_t(p.numel()));
      auto loss_at = [&](float v) {
        m.dev.to_device(m.params.values().f32() + i, &v, 4);
        ForwardState eval;
        const double loss = m.model.forward(eval, mb, Buffer(), false) * scale;
        return loss + m.model.take_moe_aux();
      };
      const double numeric = (loss_at(values[i] + eps) - loss_at(values[i] - eps)) / (2 * eps);
      loss_at(values[i]);
      EXPECT_NEAR(grads[i], numeric, 2e-3 + 0.03 * std::fabs(numeric)) << p.name << " element " << i - size_t(p.offset);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Variants, GradientCheck, ::testing::ValuesIn(kVariants),
                         [](const auto& info) { return std::string(info.param.name); });

double moe_loss(float capacity_factor) {
  test::EngineEnv env("[model]\nlayers = 2\n");
  ModelSpec s = moe(true);
  s.capacity_factor = capacity_factor;
  const ModelDims d = tiny_dims(s, 2);
  Model m(env, d);
  MicroBatch mb = batch(m.dev, d);
  ForwardState st;
  return m.model.forward(st, mb, Buffer(), false);
}

// A capacity of every choice an expert could get (factor E / k: rows slots)
// drops nothing, so the layer is the dropless one; a small one drops
// choices, which changes the loss.
TEST(MoeCapacity, DropsOnlyPastTheCapacity) {
  const double dropless = moe_loss(0);
  EXPECT_EQ(moe_loss(2), dropless);  // E / k = 4 / 2
  EXPECT_GT(std::fabs(moe_loss(0.5f) - dropless), 1e-6 * std::fabs(dropless));
}

// LoRA's adapters on every linear layer of a Llama layer (the base frozen,
// so only they have gradients), with B moved off its zero init so that
// every term of the adapter's backward is exercised. With peft.dropout the
// finite differences run training forwards of the same micro-batch: its key
// fixes the adapters' masks, so the loss is one smooth function of the
// adapters.
void check_lora_gradients(float dropout) {
  test::EngineEnv env("[model]\nlayers = 2\n");
  ModelDims d = tiny_dims(spec(Norm::kRmsNorm, Position::kRope, MlpActivation::kSwiglu, false, false), 2);
  d.lora = LoraSpec{2, 1.5f, kLoraQkv | kLoraProj | kLoraFc1 | kLoraFc2 | kLoraGate, dropout};
  Model m(env, d);
  std::mt19937 gen(5);
  std::normal_distribution<float> normal(0.f, 0.3f);
  for (size_t id = 0; id < m.params.infos().size(); ++id) {
    if (!m.params.info(int(id)).adapter) continue;
    std::vector<float> v(size_t(m.params.info(int(id)).numel()));
    for (float& x : v) x = normal(gen);
    m.params.upload(int(id), v);
  }
  MicroBatch mb = batch(m.dev, d);
  const double scale = 1.0 / double(d.rows());
  ops::fill(m.dev, m.params.grads().f32(), m.params.trainable_numel(), 0);
  ForwardState st;
  m.model.forward(st, mb, Buffer(), true);
  m.model.backward(st, mb, Buffer(), float(scale));
  std::vector<float> grads(size_t(m.params.trainable_numel())), values(size_t(m.params.numel()));
  m.dev.to_host(grads.data(), m.params.grads().data(), grads.size() * 4);
  m.dev.to_host(values.data(), m.params.values().data(), values.size() * 4);

  const float eps = 1e-2f;
  int checked = 0;
  for (const ParamInfo& p : m.params.infos()) {
    EXPECT_EQ(p.adapter, p.offset < m.params.trainable_numel()) << p.name << ": only the adapters train";
    if (!p.adapter) continue;
    ++checked;
    for (int sample = 0; sample < 4; ++sample) {
      const size_t i = size_t(p.offset) + size_t(gen() % uint64_t(p.numel()));
      auto loss_at = [&](float v) {
        m.dev.to_device(m.params.values().f32() + i, &v, 4);
        ForwardState eval;
        return m.model.forward(eval, mb, Buffer(), true) * scale;
      };
      const double numeric = (loss_at(values[i] + eps) - loss_at(values[i] - eps)) / (2 * eps);
      loss_at(values[i]);
      EXPECT_NEAR(grads[i], numeric, 2e-3 + 0.03 * std::fabs(numeric)) << p.name << " element " << i - size_t(p.offset);
    }
  }
  EXPECT_EQ(checked, 2 * 5 * 2);  // 2 layers x 5 linear layers x (A, B)
}

TEST(GradientCheckLora, AdapterBackwardMatchesFiniteDifferences) { check_lora_gradients(0); }
TEST(GradientCheckLora, AdapterBackwardWithDropoutMatchesFiniteDifferences) { check_lora_gradients(0.3f); }

}  // namespace
}  // namespace mh
