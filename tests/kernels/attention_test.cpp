// The attention op (memory-efficient, FlashAttention) against the unfused
// reference the engine runs without it: per query head a gemm for the scores,
// softmax (with document starts), dropout on the probabilities, a gemm for
// the context, and the same chain backward. Both read Q, K and V in place
// from a QKV buffer laid out as the engine's (per key/value group: its M
// query heads, then K, then V), so the strides are the engine's too.
//
// Tolerances. In f32 the two compute the same sums in another order: the
// online softmax rescales partial sums once per key tile, and the products
// are summed by tile, so each result differs by reassociation only, a few
// ulp times log2 of the terms summed (<= M * Sk = 111 here): with values
// O(1), rtol 1e-4 and atol 1e-5 leave a margin of ~100 ulp. In bf16 both
// read the same bf16 inputs and accumulate in f32; the op rounds each output
// (and each gradient) once to bf16, relative error <= 2^-9, where the
// reference rounds its intermediate probabilities and scores too: rtol 2e-2
// and atol 2e-3 cover a few such roundings of O(1) values. The gradients
// also inherit the rounding of the stored output, which the backward reads
// for delta_i = dout_i . out_i: its error, up to 2^-8 |dout_i| |out_i| ~
// 2^-8 sqrt(D) |dout| |out| = 0.04 here (D = 24, |out| <= 2), reaches dq and
// dk through dS = P (dP - delta) times scale |k| or |q| (0.2 x 2), so the
// gradients take atol 1.5e-2 (what FlashAttention's bf16 backward shows
// against an f32 reference, for the same reason).
#include "bf16.hpp"
#include "dry_kernels.hpp"
#include "test_util.hpp"

#include <megahost/rng.hpp>

namespace mh::kernels::test {
namespace {

// B samples of S tokens; each sample has `groups` key/value heads serving
// M query heads each, of size D.
struct Shape {
  int64_t B, groups, M, S, D;
  int64_t G() const { return B * groups; }
  int64_t row() const { return G() * (M + 2) * D; }       // one token's QKV
  int64_t ctx_row() const { return G() * M * D; }         // one token's context
  int64_t qkv_size() const { return S * row(); }
  int64_t ctx_size() const { return S * ctx_row(); }
  int64_t probs() const { return G() * M * S * S; }
};

constexpr float kScale = 0.2f;

// Views of the engine's buffers: slot j of each group (query head j < M,
// K = M, V = M + 1) as [G, S, D], and the context of head i as [G, S, D].
MH_Tensor slot(void* qkv, int32_t dtype, const Shape& s, int64_t j) {
  const int64_t bytes = dtype == MH_F32 ? 4 : 2;
  return with_strides(view(static_cast<char*>(qkv) + j * s.D * bytes, dtype, {s.G(), s.S, s.D}),
                      {(s.M + 2) * s.D, s.row(), 1});
}
MH_Tensor context_head(void* ctx, int32_t dtype, const Shape& s, int64_t i) {
  const int64_t bytes = dtype == MH_F32 ? 4 : 2;
  return with_strides(view(static_cast<char*>(ctx) + i * s.D * bytes, dtype, {s.G(), s.S, s.D}),
                      {s.M * s.D, s.ctx_row(), 1});
}
// The op's 4-D views over the same buffers: q-like [G, M, rows, D] from row
// `first`, k-like [G, keys, D].
MH_Tensor queries(void* qkv, int32_t dtype, const Shape& s, int64_t first, int64_t rows) {
  const int64_t bytes = dtype == MH_F32 ? 4 : 2;
  return with_strides(view(static_cast<char*>(qkv) + first * s.row() * bytes, dtype, {s.G(), s.M, rows, s.D}),
                      {(s.M + 2) * s.D, s.D, s.row(), 1});
}
MH_Tensor contexts(void* ctx, int32_t dtype, const Shape& s, int64_t first, int64_t rows) {
  const int64_t bytes = dtype == MH_F32 ? 4 : 2;
  return with_strides(view(static_cast<char*>(ctx) + first * s.ctx_row() * bytes, dtype, {s.G(), s.M, rows, s.D}),
                      {s.M * s.D, s.D, s.ctx_row(), 1});
}
MH_Tensor keys(void* qkv, int32_t dtype, const Shape& s, int64_t j, int64_t count) {
  MH_Tensor t = slot(qkv, dtype, s, j);
  t.shape[1] = count;
  return t;
}

MH_Tensor scores_of_head(std::vector<float>& scores, const Shape& s, int64_t i) {
  return with_strides(view(scores.data() + i * s.S * s.S, MH_F32, {s.G(), s.S, s.S}), {s.M * s.S * s.S, s.S, 1});
}

MH_GemmArgs gemm_args(MH_Tensor a, MH_Tensor b, MH_Tensor c, bool ta, bool tb, float beta) {
  MH_GemmArgs g{};
  g.struct_size = sizeof(g);
  g.a = a;
  g.b = b;
  g.c = c;
  g.trans_a = ta;
  g.trans_b = tb;
  g.alpha = 1.0f;
  g.beta = beta;
  return g;
}

// What a test varies beyond the shape.
struct Case {
  float p = 0.0f;
  bool documents = false;
  MH_RngSpan rng{11, 500, 0, 0};  // row_len, row_stride 0: one row of every probability
};

// Each sample's document starts: documents of 10, 15 and the rest.
std::vector<int32_t> document_starts(const Shape& s) {
  std::vector<int32_t> starts(s.B * s.S);
  for (int64_t b = 0; b < s.B; ++b)
    for (int64_t p = 0; p < s.S; ++p) starts[b * s.S + p] = int32_t(p < 10 + b ? 0 : p < 25 ? 10 + b : 25);
  return starts;
}

MH_RngSpan span(const Shape& s, const Case& c) {
  MH_RngSpan r = c.rng;
  r.row_len = uint64_t(s.probs());
  r.row_stride = r.row_len;
  return r;
}

// The unfused path in f32 on the cpu component: context from qkv, and with
// dctx the gradient dqkv (written).
struct Reference {
  std::vector<float> ctx, dqkv;
};

Reference unfused(const Cpu& cpu, std::vector<float>& qkv, std::vector<float>& dctx, std::vector<int32_t>& starts,
                  const Shape& s, const Case& c) {
  Reference r{std::vector<float>(s.ctx_size()), std::vector<float>(s.qkv_size())};
  std::vector<float> scores(s.probs()), probs(s.probs()), dprobs(s.probs());
  std::vector<uint8_t> mask(s.probs());
  for (int64_t i = 0; i < s.M; ++i)
    cpu.run(&MH_KernelsApi::gemm, gemm_args(slot(qkv.data(), MH_F32, s, i), slot(qkv.data(), MH_F32, s, s.M),
                                            scores_of_head(scores, s, i), false, true, 0));
  MH_SoftmaxArgs sm{};
  sm.struct_size = sizeof(sm);
  sm.x = sm.out = view(scores, {s.G() * s.M, s.S, s.S});
  sm.scale = kScale;
  if (c.documents) sm.starts = view(starts, {s.B, s.S});
  cpu.run(&MH_KernelsApi::softmax, sm);
  MH_DropoutArgs dr{};
  dr.struct_size = sizeof(dr);
  dr.x = view(scores, {s.probs()});
  dr.out = view(probs, {s.probs()});
  dr.mask = view(mask, {s.probs()});
  dr.residual = view(nullptr, MH_F32, {s.probs()});
  dr.p = c.p;
  dr.rng = span(s, c);
  cpu.run(&MH_KernelsApi::dropout, dr);
  for (int64_t i = 0; i < s.M; ++i)
    cpu.run(&MH_KernelsApi::gemm, gemm_args(scores_of_head(probs, s, i), slot(qkv.data(), MH_F32, s, s.M + 1),
                                            context_head(r.ctx.data(), MH_F32, s, i), false, false, 0));
  // Backward, as AttentionPart::core_bwd.
  float* dq = r.dqkv.data();
  for (int64_t i = 0; i < s.M; ++i) {
    const MH_Tensor dc = context_head(dctx.data(), MH_F32, s, i);
    cpu.run(&MH_KernelsApi::gemm, gemm_args(dc, slot(qkv.data(), MH_F32, s, s.M + 1), scores_of_head(dprobs, s, i),
                                            false, true, 0));
    cpu.run(&MH_KernelsApi::gemm,
            gemm_args(scores_of_head(probs, s, i), dc, slot(dq, MH_F32, s, s.M + 1), true, false, i > 0 ? 1.f : 0.f));
  }
  MH_DropoutArgs db = dr;
  db.x = db.out = view(dprobs, {s.probs()});
  cpu.run(&MH_KernelsApi::dropout_bwd, db);
  MH_SoftmaxArgs sb = sm;
  sb.out = view(scores, {s.G() * s.M, s.S, s.S});
  sb.dout = sb.dx = view(dprobs, {s.G() * s.M, s.S, s.S});
  cpu.run(&MH_KernelsApi::softmax_bwd, sb);
  for (int64_t i = 0; i < s.M; ++i) {
    cpu.run(&MH_KernelsApi::gemm, gemm_args(scores_of_head(dprobs, s, i), slot(qkv.data(), MH_F32, s, s.M),
                                            slot(dq, MH_F32, s, i), false, false, 0));
    cpu.run(&MH_KernelsApi::gemm, gemm_args(scores_of_head(dprobs, s, i), slot(qkv.data(), MH_F32, s, i),
                                            slot(dq, MH_F32, s, s.M), true, false, i > 0 ? 1.f : 0.f));
  }
  return r;
}

// The op's arguments for query rows [first, first + rows) against keys 0 ..
// first + rows - 1 (a causal block of the sequence: q_offset = first).
template <class T>
MH_AttentionArgs flash_args(std::vector<T>& qkv, std::vector<T>& ctx, std::vector<float>& lse,
                            std::vector<int32_t>& block_starts, const Shape& s, const Case& c, int64_t first,
                            int64_t rows) {
  const int32_t dtype = std::is_same_v<T, float> ? MH_F32 : MH_BF16;
  MH_AttentionArgs a{};
  a.struct_size = sizeof(a);
  a.q = queries(qkv.data(), dtype, s, first, rows);
  a.k = keys(qkv.data(), dtype, s, s.M, first + rows);
  a.v = keys(qkv.data(), dtype, s, s.M + 1, first + rows);
  a.out = contexts(ctx.data(), dtype, s, first, rows);
  a.lse = view(lse, {s.G(), s.M, rows});
  if (c.documents) a.starts = view(block_starts, {s.B, rows});
  a.q_offset = first;
  a.scale = kScale;
  a.dropout_p = c.p;
  a.rng = span(s, c);
  a.dropout_rows = s.S;
  a.dropout_cols = s.S;
  a.dropout_row0 = first;
  return a;
}

// The starts of rows [first, first + rows) of each sample.
std::vector<int32_t> block_of(const std::vector<int32_t>& starts, const Shape& s, int64_t first, int64_t rows) {
  std::vector<int32_t> out;
  for (int64_t b = 0; b < s.B; ++b)
    out.insert(out.end(), starts.begin() + b * s.S + first, starts.begin() + b * s.S + first + rows);
  return out;
}

// Runs the op forward and backward over the query blocks `cuts` split the
// sequence into (each against the keys before its end), accumulating the
// gradients into one dqkv, and compares with the unfused reference.
void expect_flash_equals_unfused(const Shape& s, const Case& c, const std::vector<int64_t>& cuts) {
  const Cpu cpu;
  std::vector<float> qkv = random_floats(s.qkv_size(), 1, -2.0f, 2.0f), dctx = random_floats(s.ctx_size(), 2);
  std::vector<int32_t> starts = document_starts(s);
  const Reference ref = unfused(cpu, qkv, dctx, starts, s, c);
  std::vector<float> ctx(s.ctx_size(), 9.0f), dqkv(s.qkv_size(), 0.0f);
  for (size_t b = 0; b + 1 < cuts.size(); ++b) {
    const int64_t first = cuts[b], rows = cuts[b + 1] - cuts[b];
    std::vector<float> lse(s.G() * s.M * rows);
    std::vector<int32_t> block_starts = block_of(starts, s, first, rows);
    MH_AttentionArgs a = flash_args(qkv, ctx, lse, block_starts, s, c, first, rows);
    cpu.run(&MH_KernelsApi::attention, a);
    a.dout = contexts(dctx.data(), MH_F32, s, first, rows);
    a.dq = queries(dqkv.data(), MH_F32, s, first, rows);
    a.dk = keys(dqkv.data(), MH_F32, s, s.M, first + rows);
    a.dv = keys(dqkv.data(), MH_F32, s, s.M + 1, first + rows);
    cpu.run(&MH_KernelsApi::attention_bwd, a);
  }
  EXPECT_TRUE(all_close(ctx, ref.ctx, 1e-4, 1e-5)) << "context";
  EXPECT_TRUE(all_close(dqkv, ref.dqkv, 1e-4, 1e-5)) << "dqkv";
}

const Shape kOdd{2, 2, 3, 37, 24};  // GQA: 2 key/value groups of 3 query heads each

TEST(Attention, EqualsTheUnfusedPathForwardAndBackward) { expect_flash_equals_unfused(kOdd, {}, {0, 37}); }

TEST(Attention, EqualsTheUnfusedPathWithOneHeadPerGroup) {
  expect_flash_equals_unfused({1, 3, 1, 70, 16}, {}, {0, 70});
}

TEST(Attention, DropoutDrawsTheMaskTheDropoutOpDraws) { expect_flash_equals_unfused(kOdd, {0.2f}, {0, 37}); }

TEST(Attention, DocumentStartsMaskEarlierDocuments) { expect_flash_equals_unfused(kOdd, {0.0f, true}, {0, 37}); }

// Blocks of query rows with q_offset, as context parallelism and decode call
// it; their dk and dv accumulate into the same buffer.
TEST(Attention, QueryBlocksWithAnOffsetAddUpToTheWholeSequence) {
  expect_flash_equals_unfused(kOdd, {0.2f, true}, {0, 5, 6, 30, 37});
}

// Ring attention (context parallelism, p2p, ABI 1.8): every query row
// against key blocks visited in any order, each forward call merging its
// block into out and lse (accumulate; the first block leaves rows that see
// none of it at out 0, lse -inf), each backward call taking the final out
// and lse with its block's keys: the whole sequence's function, dropout
// drawn at each block's columns (dropout_col0).
TEST(Attention, KeyBlocksMergedInAnyOrderEqualTheWholeSequence) {
  const Shape& s = kOdd;
  const Case c{0.2f};
  const Cpu cpu;
  std::vector<float> qkv = random_floats(s.qkv_size(), 1, -2.0f, 2.0f), dctx = random_floats(s.ctx_size(), 2);
  std::vector<int32_t> starts = document_starts(s), unused;
  const Reference ref = unfused(cpu, qkv, dctx, starts, s, c);
  std::vector<float> ctx(s.ctx_size(), 9.0f), dqkv(s.qkv_size(), 0.0f), lse(s.G() * s.M * s.S);
  // Key rows [k0, k1) of slot j of a QKV-like buffer.
  const auto block = [&](std::vector<float>& buffer, int64_t j, int64_t k0, int64_t k1) {
    MH_Tensor t = keys(buffer.data(), MH_F32, s, j, k1 - k0);
    t.data = static_cast<float*>(t.data) + k0 * s.row();
    return t;
  };
  const std::pair<int64_t, int64_t> blocks[] = {{20, 37}, {0, 8}, {8, 20}};
  for (const bool backward : {false, true})
    for (size_t b = 0; b < std::size(blocks); ++b) {
      const auto [k0, k1] = blocks[b];
      MH_AttentionArgs a = flash_args(qkv, ctx, lse, unused, s, c, 0, s.S);
      a.k = block(qkv, s.M, k0, k1);
      a.v = block(qkv, s.M + 1, k0, k1);
      a.q_offset = -k0;
      a.dropout_col0 = k0;
      a.accumulate = b > 0;
      if (!backward) {
        cpu.run(&MH_KernelsApi::attention, a);
        continue;
      }
      a.dout = contexts(dctx.data(), MH_F32, s, 0, s.S);
      a.dq = queries(dqkv.data(), MH_F32, s, 0, s.S);
      a.dk = block(dqkv, s.M, k0, k1);
      a.dv = block(dqkv, s.M + 1, k0, k1);
      cpu.run(&MH_KernelsApi::attention_bwd, a);
    }
  EXPECT_TRUE(all_close(ctx, ref.ctx, 1e-4, 1e-5)) << "context";
  EXPECT_TRUE(all_close(dqkv, ref.dqkv, 1e-4, 1e-5)) << "dqkv";
}

// The forward's lse is log sum_j exp(scale q.k_j) over the visible keys; a
// row that sees no key (offset before the first) has out 0 and lse -inf.
TEST(Attention, LseIsTheLogSumExpAndEmptyRowsAreZero) {
  const Shape s{1, 1, 1, 5, 8};
  std::vector<float> qkv = random_floats(s.qkv_size(), 3), ctx(s.ctx_size(), 9.0f), lse(s.S);
  std::vector<int32_t> unused;
  MH_AttentionArgs a = flash_args(qkv, ctx, lse, unused, s, {}, 0, s.S);
  a.q_offset = -2;
  Cpu().run(&MH_KernelsApi::attention, a);
  for (int64_t i = 0; i < s.S; ++i) {
    double sum = 0;
    for (int64_t j = 0; j <= i - 2; ++j) {
      double dot = 0;
      for (int64_t c = 0; c < s.D; ++c) dot += double(qkv[i * s.row() + c]) * qkv[j * s.row() + s.D + c];
      sum += std::exp(kScale * dot);
    }
    if (i < 2) {
      EXPECT_EQ(lse[i], -std::numeric_limits<float>::infinity()) << i;
      for (int64_t c = 0; c < s.D; ++c) EXPECT_EQ(ctx[i * s.ctx_row() + c], 0.0f) << i;
    } else {
      EXPECT_NEAR(lse[i], std::log(sum), 1e-5) << i;
    }
  }
}

TEST(Attention, Bf16MatchesTheF32PathOnTheSameInputs) {
  const Shape s = kOdd;
  const Case c{0.1f, true};
  const Cpu cpu;
  std::vector<float> qkv = random_floats(s.qkv_size(), 4, -2.0f, 2.0f), dctx = random_floats(s.ctx_size(), 5);
  std::vector<uint16_t> qkv16(qkv.size()), dctx16(dctx.size()), ctx16(s.ctx_size()), dqkv16(s.qkv_size(), 0);
  for (size_t i = 0; i < qkv.size(); ++i) qkv[i] = cpu::from_bf16(qkv16[i] = cpu::to_bf16(qkv[i]));
  for (size_t i = 0; i < dctx.size(); ++i) dctx[i] = cpu::from_bf16(dctx16[i] = cpu::to_bf16(dctx[i]));
  std::vector<int32_t> starts = document_starts(s);
  const Reference ref = unfused(cpu, qkv, dctx, starts, s, c);
  Instance<CpuKernels> bf16({{"threads", "2"}, {"peak_gflops", "50"}, {"dtype", "\"bf16\""}});
  std::vector<float> lse(s.G() * s.M * s.S);
  MH_AttentionArgs a = flash_args(qkv16, ctx16, lse, starts, s, c, 0, s.S);
  bf16.run(&MH_KernelsApi::attention, a);
  a.dout = contexts(dctx16.data(), MH_BF16, s, 0, s.S);
  a.dq = queries(dqkv16.data(), MH_BF16, s, 0, s.S);
  a.dk = keys(dqkv16.data(), MH_BF16, s, s.M, s.S);
  a.dv = keys(dqkv16.data(), MH_BF16, s, s.M + 1, s.S);
  bf16.run(&MH_KernelsApi::attention_bwd, a);
  std::vector<float> ctx(ctx16.size()), dqkv(dqkv16.size());
  for (size_t i = 0; i < ctx.size(); ++i) ctx[i] = cpu::from_bf16(ctx16[i]);
  for (size_t i = 0; i < dqkv.size(); ++i) dqkv[i] = cpu::from_bf16(dqkv16[i]);
  EXPECT_TRUE(all_close(ctx, ref.ctx, 2e-2, 2e-3)) << "context";
  EXPECT_TRUE(all_close(dqkv, ref.dqkv, 2e-2, 1.5e-2)) << "dqkv";
}

// The dry component validates with the same code: a dry run that passes is
// a real run that passes.
TEST(Attention, CpuAndDryRefuseKeysOfAnotherHeadSizeAlike) {
  const Shape s{1, 1, 1, 4, 8};
  std::vector<float> qkv(s.qkv_size()), ctx(s.ctx_size()), lse(s.S);
  std::vector<int32_t> unused;
  MH_AttentionArgs a = flash_args(qkv, ctx, lse, unused, s, {}, 0, s.S);
  Instance<DryKernels>().run(&MH_KernelsApi::attention, a);
  a.k.shape[2] = 4;
  const mh::ErrorPtr e = Cpu().fails(&MH_KernelsApi::attention, a);
  const mh::ErrorPtr dry = Instance<DryKernels>().fails(&MH_KernelsApi::attention, a);
  ASSERT_NE(e, nullptr);
  ASSERT_NE(dry, nullptr);
  EXPECT_NE(std::string(e->message).find("k [1, 4, 4] must be [G, Sk, D]"), std::string::npos) << e->message;
  EXPECT_STREQ(e->message, dry->message);
}

}  // namespace
}  // namespace mh::kernels::test
