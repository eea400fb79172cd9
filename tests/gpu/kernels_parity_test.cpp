// Op-by-op parity of the cuda kernels with the cpu kernels on fresh random
// inputs (the seed is in every failure message), in fp32 and in bf16 with
// f32 parameters, gradients and statistics. Skipped without a CUDA device.
#include "parity.hpp"

namespace mh::gpu_test {
namespace {

INSTANTIATE_TEST_SUITE_P(Dtypes, Parity, ::testing::Values("fp32", "bf16"),
                         [](const auto& info) { return info.param; });

constexpr float kNaN = NAN;

TEST_P(Parity, GemmInEveryTranspositionWritesAllOfC) {
  const int64_t M = 67, N = 45, K = 129;
  for (int32_t ta : {0, 1}) {
    for (int32_t tb : {0, 1}) {
      for (int32_t c_dtype : act_and_f32()) {
        Pair a = random(ta ? std::vector<int64_t>{1, K, M} : std::vector<int64_t>{1, M, K}, act());
        Pair b = random(tb ? std::vector<int64_t>{1, N, K} : std::vector<int64_t>{1, K, N}, act());
        Pair c = filled({1, M, N}, c_dtype, kNaN);
        run(&MH_KernelsApi::gemm, [&](MH_GemmArgs& g, Side s) {
          g.a = a.on(s);
          g.b = b.on(s);
          g.c = c.on(s);
          g.trans_a = ta;
          g.trans_b = tb;
          g.alpha = 0.75f;
        });
        expect_close(c, "c, trans_a " + std::to_string(ta) + ", trans_b " + std::to_string(tb));
      }
    }
  }
}

TEST_P(Parity, GemmAccumulatesIntoCWithBeta) {
  for (int32_t c_dtype : act_and_f32()) {
    Pair a = random({2, 40, 70}, act()), b = random({2, 70, 33}, act()), c = random({2, 40, 33}, c_dtype);
    run(&MH_KernelsApi::gemm, [&](MH_GemmArgs& g, Side s) {
      g.a = a.on(s);
      g.b = b.on(s);
      g.c = c.on(s);
      g.alpha = 1.0f;
      g.beta = 0.5f;
    });
    expect_close(c, "c");
  }
}

// The engine's attention: Q, K, V interleaved per head in [s, heads, 3, d],
// scores = Q K^T per head, and the context written head by head side by side.
TEST_P(Parity, GemmOnInterleavedAttentionHeads) {
  const int64_t S = 33, G = 6, D = 16;
  Pair qkv = random({S, G, 3, D}, act());
  auto head = [&](int64_t which, Side s) { return qkv.strided(s, {G, S, D}, {3 * D, G * 3 * D, 1}, which * D); };
  Pair scores = filled({G, S, S}, act(), kNaN);
  run(&MH_KernelsApi::gemm, [&](MH_GemmArgs& g, Side s) {
    g.a = head(0, s);
    g.b = head(1, s);
    g.c = scores.on(s);
    g.trans_b = 1;
    g.alpha = 1.0f;
  });
  expect_close(scores, "scores");
  Pair probs = random({G, S, S}, act(), 0.0f, 1.0f);
  Pair context = filled({S, G, D}, act(), kNaN);
  run(&MH_KernelsApi::gemm, [&](MH_GemmArgs& g, Side s) {
    g.a = probs.on(s);
    g.b = head(2, s);
    g.c = context.strided(s, {G, S, D}, {D, G * D, 1});
    g.alpha = 1.0f;
  });
  expect_close(context, "context");
}

TEST_P(Parity, GemmBroadcastsAnOperandWithBatchStrideZero) {
  const int64_t batch = 3, M = 20, N = 24, K = 50;
  Pair a = random({1, M, K}, act()), b = random({batch, K, N}, act()), c = filled({batch, M, N}, act(), kNaN);
  run(&MH_KernelsApi::gemm, [&](MH_GemmArgs& g, Side s) {
    g.a = a.strided(s, {batch, M, K}, {0, K, 1});
    g.b = b.on(s);
    g.c = c.on(s);
    g.alpha = 1.0f;
  });
  expect_close(c, "c");
}

TEST_P(Parity, GemmWithAnEmptyInnerDimensionScalesC) {
  const int64_t M = 9, N = 11;
  Pair a = filled({1, M, 0}, act(), 0.0f), b = filled({1, 0, N}, act(), 0.0f), c = random({1, M, N}, act());
  run(&MH_KernelsApi::gemm, [&](MH_GemmArgs& g, Side s) {
    g.a = a.strided(s, {1, M, 0}, {M, 1, 1});
    g.b = b.on(s);
    g.c = c.on(s);
    g.alpha = 1.0f;
    g.beta = 0.5f;
  });
  expect_close(c, "c");
}

TEST_P(Parity, LayerNormForward) {
  const int64_t N = 37, C = 300;
  for (int32_t param_dtype : act_and_f32()) {
    Pair x = random({N, C}, act(), -2.0f, 3.0f), w = random({C}, param_dtype), b = random({C}, param_dtype);
    Pair out = filled({N, C}, act(), kNaN), mean = filled({N}, MH_F32, kNaN), rstd = filled({N}, MH_F32, kNaN);
    run(&MH_KernelsApi::layernorm, [&](MH_LayerNormArgs& a, Side s) {
      a.x = x.on(s);
      a.weight = w.on(s);
      a.bias = b.on(s);
      a.out = out.on(s);
      a.mean = mean.on(s);
      a.rstd = rstd.on(s);
      a.eps = 1e-5f;
    });
    expect_close(out, "out");
    expect_close(mean, "mean");
    expect_close(rstd, "rstd");
  }
}

TEST_P(Parity, LayerNormBackwardAccumulatesEveryGradient) {
  const int64_t N = 41, C = 260;
  Pair x = random({N, C}, act(), -2.0f, 3.0f), w = random({C}, MH_F32), b = random({C}, MH_F32);
  Pair out = filled({N, C}, act(), kNaN), mean = filled({N}, MH_F32, kNaN), rstd = filled({N}, MH_F32, kNaN);
  run(&MH_KernelsApi::layernorm, [&](MH_LayerNormArgs& a, Side s) {
    a.x = x.on(s);
    a.weight = w.on(s);
    a.bias = b.on(s);
    a.out = out.on(s);
    a.mean = mean.on(s);
    a.rstd = rstd.on(s);
    a.eps = 1e-5f;
  });
  Pair dout = random({N, C}, act()), dx = random({N, C}, act());
  Pair dw = random({C}, MH_F32), db = random({C}, MH_F32);
  run(&MH_KernelsApi::layernorm_bwd, [&](MH_LayerNormBwdArgs& a, Side s) {
    a.dout = dout.on(s);
    a.x = x.on(s);
    a.weight = w.on(s);
    a.mean = mean.on(s);
    a.rstd = rstd.on(s);
    a.dx = dx.on(s);
    a.dweight = dw.on(s);
    a.dbias = db.on(s);
  });
  expect_close(dx, "dx");
  expect_close(dw, "dweight");
  expect_close(db, "dbias");
}

TEST_P(Parity, ElementwiseEveryOp) {
  const int64_t n = 1037;
  for (int32_t op = MH_GELU; op <= MH_AXPY; ++op) {
    Pair x = random({n}, act(), -4.0f, 4.0f), y = random({n}, act()), out = filled({n}, act(), kNaN);
    run(&MH_KernelsApi::elementwise, [&](MH_ElementwiseArgs& a, Side s) {
      a.op = op;
      a.x = x.on(s);
      a.y = y.on(s);
      a.out = out.on(s);
      a.alpha = 1.25f;
    });
    expect_close(out, "op " + std::to_string(op));
  }
}

TEST_P(Parity, ElementwiseInPlace) {
  Pair x = random({777}, act()), y = random({777}, act());
  run(&MH_KernelsApi::elementwise, [&](MH_ElementwiseArgs& a, Side s) {
    a.op = MH_AXPY;
    a.x = x.on(s);
    a.y = y.on(s);
    a.out = y.on(s);
    a.alpha = -0.5f;
  });
  expect_close(y, "y");
}

// MH_COPY between dtypes converts: how the engine keeps bf16 copies of f32
// master weights.
TEST_P(Parity, CopyConvertsBetweenDtypes) {
  for (int32_t from : act_and_f32()) {
    for (int32_t to : act_and_f32()) {
      Pair x = random({513}, from), out = filled({513}, to, kNaN);
      run(&MH_KernelsApi::elementwise, [&](MH_ElementwiseArgs& a, Side s) {
        a.op = MH_COPY;
        a.x = x.on(s);
        a.out = out.on(s);
      });
      expect_close(out, "copy " + std::to_string(from) + " -> " + std::to_string(to));
    }
  }
}

TEST_P(Parity, BiasAddInPlaceAndBackward) {
  const int64_t N = 45, C = 333;
  Pair x = random({N, C}, act()), bias = random({C}, MH_F32);
  run(&MH_KernelsApi::bias_add, [&](MH_BiasArgs& a, Side s) {
    a.x = x.on(s);
    a.bias = bias.on(s);
    a.out = x.on(s);
  });
  expect_close(x, "x + bias");
  for (int32_t grad_dtype : act_and_f32()) {
    Pair dout = random({N, C}, act()), dbias = random({C}, grad_dtype);
    run(&MH_KernelsApi::bias_bwd, [&](MH_BiasArgs& a, Side s) {
      a.x = dout.on(s);
      a.bias = dbias.on(s);
      a.out = dout.on(s);
    });
    expect_close(dbias, "dbias");
  }
}

TEST_P(Parity, CausalSoftmaxForwardAndBackwardInPlace) {
  for (int64_t S : {5, 70, 300}) {
    const int64_t G = 4;
    Pair scores = random({G, S, S}, act(), -3.0f, 3.0f), probs = filled({G, S, S}, act(), kNaN);
    run(&MH_KernelsApi::softmax, [&](MH_SoftmaxArgs& a, Side s) {
      a.x = scores.on(s);
      a.out = probs.on(s);
      a.scale = 0.125f;
    });
    expect_close(probs, "probabilities, S " + std::to_string(S));
    Pair grad = random({G, S, S}, act());
    run(&MH_KernelsApi::softmax_bwd, [&](MH_SoftmaxArgs& a, Side s) {
      a.out = probs.on(s);
      a.dout = grad.on(s);
      a.dx = grad.on(s);
      a.scale = 0.125f;
    });
    expect_close(grad, "dx, S " + std::to_string(S));
  }
}

// Decode (Q = 1) and a chunk of prefill against a longer cache: the last Q
// rows of causal [G, T, T] scores (ABI 1.4).
TEST_P(Parity, NonSquareCausalSoftmaxForwardAndBackward) {
  for (auto [Q, T] : {std::pair<int64_t, int64_t>{1, 1}, {1, 300}, {7, 70}, {33, 257}}) {
    const int64_t G = 5;
    const std::string shape = "Q " + std::to_string(Q) + ", T " + std::to_string(T);
    Pair scores = random({G, Q, T}, act(), -3.0f, 3.0f), probs = filled({G, Q, T}, act(), kNaN);
    run(&MH_KernelsApi::softmax, [&](MH_SoftmaxArgs& a, Side s) {
      a.x = scores.on(s);
      a.out = probs.on(s);
      a.scale = 0.125f;
    });
    expect_close(probs, "probabilities, " + shape);
    Pair grad = random({G, Q, T}, act()), dx = filled({G, Q, T}, act(), kNaN);
    run(&MH_KernelsApi::softmax_bwd, [&](MH_SoftmaxArgs& a, Side s) {
      a.out = probs.on(s);
      a.dout = grad.on(s);
      a.dx = dx.on(s);
      a.scale = 0.125f;
    });
    expect_close(dx, "dx, " + shape);
  }
}

// Packed documents (ABI 1.6): each of B = 2 samples' rows see their
// document's columns only (starts: I32 [B, T], G / B groups a sample), in
// the training shape and in the last Q rows of a longer sequence.
TEST_P(Parity, SoftmaxMasksEachRowBeforeItsDocumentsStart) {
  for (auto [Q, T] : {std::pair<int64_t, int64_t>{70, 70}, {7, 300}}) {
    const int64_t G = 6, B = 2;
    const std::string shape = "Q " + std::to_string(Q) + ", T " + std::to_string(T);
    // Documents of sample b start every 9 + 14 b positions.
    std::vector<float> first(static_cast<size_t>(B * T));
    for (int64_t b = 0; b < B; ++b)
      for (int64_t p = 0; p < T; ++p) first[size_t(b * T + p)] = float(p - p % (9 + 14 * b));
    Pair starts = values({B, T}, MH_I32, first);
    Pair scores = random({G, Q, T}, act(), -3.0f, 3.0f), probs = filled({G, Q, T}, act(), kNaN);
    run(&MH_KernelsApi::softmax, [&](MH_SoftmaxArgs& a, Side s) {
      a.x = scores.on(s);
      a.out = probs.on(s);
      a.scale = 0.125f;
      a.starts = starts.on(s);
    });
    expect_close(probs, "probabilities, " + shape);
    Pair grad = random({G, Q, T}, act()), dx = filled({G, Q, T}, act(), kNaN);
    run(&MH_KernelsApi::softmax_bwd, [&](MH_SoftmaxArgs& a, Side s) {
      a.out = probs.on(s);
      a.dout = grad.on(s);
      a.dx = dx.on(s);
      a.scale = 0.125f;
      a.starts = starts.on(s);
    });
    expect_close(dx, "dx, " + shape);
  }
}

// Per-row positions of packed documents (ABI 1.6) on strided QKV heads:
// G = 6 heads of B = 2 samples, forward and inverse.
TEST_P(Parity, RopeAtPackedDocumentsPositions) {
  const int64_t S = 33, G = 6, B = 2, D = 66;
  Pair qkv = random({S, G, 3, D}, act());
  Pair positions = integers({B, S}, 0, 4000);
  auto head = [&](Side s) { return qkv.strided(s, {G, S, D}, {3 * D, G * 3 * D, 1}, 0); };
  for (int32_t inverse : {0, 1}) {
    run(&MH_KernelsApi::rope, [&](MH_RopeArgs& a, Side s) {
      a.x = a.out = head(s);
      a.theta = 10000.0f;
      a.inverse = inverse;
      a.positions = positions.on(s);
    });
    expect_close(qkv, "qkv, inverse " + std::to_string(inverse));
  }
}

// The K heads of S new tokens, interleaved in a fused [S, G, 3, D] QKV
// buffer, appended at position p of a [G, T, D] cache (ABI 1.4): bit for bit,
// the rest of the cache untouched.
TEST_P(Parity, StridedCopyAppendsHeadsToACacheBitForBit) {
  const int64_t G = 6, D = 24, T = 40;
  std::vector<int32_t> dtypes = act_and_f32();
  dtypes.push_back(MH_I32);
  for (int32_t dtype : dtypes) {
    const std::string name = dtype == MH_I32 ? "i32" : dtype == MH_BF16 ? "bf16" : "f32";
    for (auto [S, p] : {std::pair<int64_t, int64_t>{1, 17}, {13, 0}}) {
      Pair qkv = dtype == MH_I32 ? integers({S, G, 3, D}, -1000000, 1000000) : random({S, G, 3, D}, dtype);
      Pair cache = filled({G, T, D}, dtype, -7.0f);
      run(&MH_KernelsApi::strided_copy, [&](MH_StridedCopyArgs& a, Side s) {
        a.x = qkv.strided(s, {G, S, D}, {3 * D, G * 3 * D, 1}, D);
        a.out = cache.strided(s, {G, S, D}, {T * D, D, 1}, p * D);
      });
      expect_equal(cache, "cache, " + name + ", S " + std::to_string(S));
    }
  }
}

// The masks come from the same counter-based draws: equal bit for bit.
// Memory-efficient attention (ABI 1.7) on the engine's QKV rows: 2 samples of
// 2 key/value groups of 3 query heads (GQA), a block of query rows 10 .. 36
// against keys 0 .. 36 (q_offset 10), packed documents and dropout. The
// backward accumulates into gradients that start non-zero.
TEST_P(Parity, AttentionForwardAndBackwardOnGroupedQueryBlocks) {
  const int64_t S = 37, first = 10, rows = S - first, G = 4, M = 3, D = 24, B = 2;
  Pair qkv = random({S, G, M + 2, D}, act(), -2.0f, 2.0f), dqkv = random({S, G, M + 2, D}, act());
  Pair ctx = filled({rows, G, M, D}, act(), kNaN), dctx = random({rows, G, M, D}, act());
  Pair lse = filled({G, M, rows}, MH_F32, kNaN);
  std::vector<float> first_column(static_cast<size_t>(B * rows));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < rows; ++i) first_column[size_t(b * rows + i)] = float((first + i) / (9 + 5 * b) * (9 + 5 * b));
  Pair starts = values({B, rows}, MH_I32, first_column);
  const int64_t row = G * (M + 2) * D;
  auto queries = [&](Pair& p, Side s) { return p.strided(s, {G, M, rows, D}, {(M + 2) * D, D, row, 1}, first * row); };
  auto keys = [&](Pair& p, Side s, int64_t slot) { return p.strided(s, {G, S, D}, {(M + 2) * D, row, 1}, slot * D); };
  auto contexts = [&](Pair& p, Side s) { return p.strided(s, {G, M, rows, D}, {M * D, D, G * M * D, 1}); };
  auto fill = [&](MH_AttentionArgs& a, Side s) {
    a.q = queries(qkv, s);
    a.k = keys(qkv, s, M);
    a.v = keys(qkv, s, M + 1);
    a.out = contexts(ctx, s);
    a.lse = lse.on(s);
    a.starts = starts.on(s);
    a.q_offset = first;
    a.scale = 0.2f;
    a.dropout_p = 0.1f;
    a.rng = MH_RngSpan{5, 7, uint64_t(G * M * S * S), uint64_t(G * M * S * S)};
    a.dropout_rows = a.dropout_cols = S;
    a.dropout_row0 = first;
  };
  run(&MH_KernelsApi::attention, fill);
  expect_close(ctx, "context");
  expect_close(lse, "lse");
  run(&MH_KernelsApi::attention_bwd, [&](MH_AttentionArgs& a, Side s) {
    fill(a, s);
    a.dout = contexts(dctx, s);
    a.dq = queries(dqkv, s);
    a.dk = keys(dqkv, s, M);
    a.dv = keys(dqkv, s, M + 1);
  });
  expect_close(dqkv, "dqkv");
}

// Ring attention's merge (ABI 1.8, accumulate): the causal diagonal block of
// keys, then an earlier block every query sees merged into the context and
// lse the first call wrote, dropout drawn at each block's columns.
TEST_P(Parity, AttentionAccumulateMergesAnEarlierKeyBlock) {
  const int64_t S = 37, G = 4, M = 3, D = 24, row = G * (M + 2) * D;
  Pair qkv = random({S, G, M + 2, D}, act(), -2.0f, 2.0f), earlier = random({S, G, M + 2, D}, act(), -2.0f, 2.0f);
  Pair ctx = filled({S, G, M, D}, act(), kNaN), lse = filled({G, M, S}, MH_F32, kNaN);
  auto keys = [&](Pair& p, Side s, int64_t slot) { return p.strided(s, {G, S, D}, {(M + 2) * D, row, 1}, slot * D); };
  for (int32_t block : {0, 1})
    run(&MH_KernelsApi::attention, [&](MH_AttentionArgs& a, Side s) {
      Pair& kv = block == 0 ? qkv : earlier;
      a.q = qkv.strided(s, {G, M, S, D}, {(M + 2) * D, D, row, 1}, 0);
      a.k = keys(kv, s, M);
      a.v = keys(kv, s, M + 1);
      a.out = ctx.strided(s, {G, M, S, D}, {M * D, D, G * M * D, 1}, 0);
      a.lse = lse.on(s);
      a.q_offset = block == 0 ? 0 : S;
      a.scale = 0.2f;
      a.dropout_p = 0.1f;
      a.rng = MH_RngSpan{5, 7, uint64_t(G * M * S * 2 * S), uint64_t(G * M * S * 2 * S)};
      a.dropout_rows = S;
      a.dropout_cols = 2 * S;
      a.dropout_col0 = block == 0 ? S : 0;
      a.accumulate = block;
    });
  expect_close(ctx, "context");
  expect_close(lse, "lse");
}

TEST_P(Parity, DropoutMasksEqualTheCpusBitForBit) {
  const int64_t rows = 5, len = 301, n = rows * len;
  const MH_RngSpan rng{seed(), 12345, uint64_t(len), 1000};
  for (bool with_residual : {true, false}) {
    Pair x = random({n}, act()), residual = random({n}, act());
    Pair out = filled({n}, act(), kNaN), mask = filled({n}, MH_U8, 7.0f);
    run(&MH_KernelsApi::dropout, [&](MH_DropoutArgs& a, Side s) {
      a.x = x.on(s);
      a.residual = with_residual ? residual.on(s) : MH_Tensor{};
      a.out = out.on(s);
      a.mask = mask.on(s);
      a.p = 0.3f;
      a.rng = rng;
    });
    expect_equal(mask, "mask");
    expect_close(out, "out");
    Pair dout = random({n}, act()), dx = filled({n}, act(), kNaN);
    run(&MH_KernelsApi::dropout_bwd, [&](MH_DropoutArgs& a, Side s) {
      a.out = dout.on(s);
      a.x = dx.on(s);
      a.mask = mask.on(s);
      a.p = 0.3f;
    });
    expect_close(dx, "dx");
  }
}

// Ids outside the shard [20, 117) give zero rows and no gradient.
TEST_P(Parity, EmbeddingLookupAndAtomicBackward) {
  const int64_t R = 97, C = 130, N = 500, id_start = 20;
  Pair table = random({R, C}, act()), ids = integers({N}, 0, 140);
  for (bool accumulate : {false, true}) {
    Pair out = accumulate ? random({N, C}, act()) : filled({N, C}, act(), kNaN);
    run(&MH_KernelsApi::embedding, [&](MH_EmbeddingArgs& a, Side s) {
      a.table = table.on(s);
      a.ids = ids.on(s);
      a.out = out.on(s);
      a.id_start = id_start;
      a.accumulate = accumulate;
    });
    expect_close(out, accumulate ? "out (accumulated)" : "out");
  }
  for (int32_t grad_dtype : act_and_f32()) {
    Pair dtable = random({R, C}, grad_dtype), dout = random({N, C}, act());
    run(&MH_KernelsApi::embedding_bwd, [&](MH_EmbeddingArgs& a, Side s) {
      a.table = dtable.on(s);
      a.ids = ids.on(s);
      a.out = dout.on(s);
      a.id_start = id_start;
    });
    expect_close(dtable, "dtable");
  }
}

TEST_P(Parity, CrossEntropyInThreeSteps) {
  const int64_t N = 33, V = 1000, id_start = 100;
  for (int32_t logits_dtype : act_and_f32()) {
    Pair logits = random({N, V}, logits_dtype, -5.0f, 5.0f), targets = integers({N}, 0, 1199);
    Pair row_max = filled({N}, MH_F32, kNaN), sum_exp = filled({N}, MH_F32, kNaN);
    Pair target_logit = filled({N}, MH_F32, kNaN);
    for (int32_t step = MH_XENT_MAX; step <= MH_XENT_BWD; ++step) {
      run(&MH_KernelsApi::xent, [&](MH_XentArgs& a, Side s) {
        a.step = step;
        a.logits = logits.on(s);
        a.targets = targets.on(s);
        a.row_max = row_max.on(s);
        a.sum_exp = sum_exp.on(s);
        a.target_logit = target_logit.on(s);
        a.id_start = id_start;
        a.scale = 1.0f / N;
      });
    }
    expect_close(row_max, "row_max");
    expect_close(sum_exp, "sum_exp");
    expect_close(target_logit, "target_logit");
    expect_close(logits, "dlogits");
  }
}

// A vocabulary padded past id_limit = 900 (this shard: ids [100, 1100)):
// the padded logits take no part and get gradient 0 on both.
TEST_P(Parity, CrossEntropyLeavesIdsPastTheLimitOut) {
  const int64_t N = 17, V = 1000, id_start = 100, id_limit = 900;
  Pair logits = random({N, V}, act(), -5.0f, 5.0f), targets = integers({N}, 0, 899);
  Pair row_max = filled({N}, MH_F32, kNaN), sum_exp = filled({N}, MH_F32, kNaN);
  Pair target_logit = filled({N}, MH_F32, kNaN);
  for (int32_t step = MH_XENT_MAX; step <= MH_XENT_BWD; ++step) {
    run(&MH_KernelsApi::xent, [&](MH_XentArgs& a, Side s) {
      a.step = step;
      a.logits = logits.on(s);
      a.targets = targets.on(s);
      a.row_max = row_max.on(s);
      a.sum_exp = sum_exp.on(s);
      a.target_logit = target_logit.on(s);
      a.id_start = id_start;
      a.scale = 1.0f / N;
      a.id_limit = id_limit;
    });
  }
  expect_close(row_max, "row_max");
  expect_close(sum_exp, "sum_exp");
  expect_close(logits, "dlogits");
  const std::vector<float> dlogits = logits.gpu();
  for (int64_t n = 0; n < N; ++n)
    for (int64_t v = id_limit - id_start; v < V; ++v) ASSERT_EQ(dlogits[n * V + v], 0.0f) << n << ", " << v;
}

TEST_P(Parity, RmsNormForwardAndBackward) {
  const int64_t N = 37, C = 301;
  Pair x = random({N, C}, act(), -2.0f, 3.0f), w = random({C}, MH_F32, 0.5f, 1.5f);
  Pair out = filled({N, C}, act(), kNaN), rstd = filled({N}, MH_F32, kNaN);
  run(&MH_KernelsApi::rmsnorm, [&](MH_RmsNormArgs& a, Side s) {
    a.x = x.on(s);
    a.weight = w.on(s);
    a.out = out.on(s);
    a.rstd = rstd.on(s);
    a.eps = 1e-5f;
  });
  expect_close(out, "out");
  expect_close(rstd, "rstd");
  for (int32_t dout_dtype : act_and_f32()) {
    Pair dout = random({N, C}, dout_dtype), dx = random({N, C}, MH_F32), dw = random({C}, MH_F32);
    run(&MH_KernelsApi::rmsnorm_bwd, [&](MH_RmsNormBwdArgs& a, Side s) {
      a.dout = dout.on(s);
      a.x = x.on(s);
      a.weight = w.on(s);
      a.rstd = rstd.on(s);
      a.dx = dx.on(s);
      a.dweight = dw.on(s);
    });
    expect_close(dx, "dx");
    expect_close(dw, "dweight");
  }
}

// Q rotated in place and K out of place inside a fused [S, G, 3, D] QKV
// buffer, at positions up to 4000, forward and inverse; V stays as it was.
TEST_P(Parity, RopeOnStridedQkvHeads) {
  const int64_t S = 33, G = 6, D = 66, offset = 3967;
  Pair qkv = random({S, G, 3, D}, act());
  Pair k_out = filled({G, S, D}, act(), kNaN);
  auto head = [&](int64_t which, Side s) { return qkv.strided(s, {G, S, D}, {3 * D, G * 3 * D, 1}, which * D); };
  for (int32_t inverse : {0, 1}) {
    run(&MH_KernelsApi::rope, [&](MH_RopeArgs& a, Side s) {
      a.x = a.out = head(0, s);
      a.position_offset = offset;
      a.theta = 10000.0f;
      a.inverse = inverse;
    });
    run(&MH_KernelsApi::rope, [&](MH_RopeArgs& a, Side s) {
      a.x = head(1, s);
      a.out = k_out.on(s);
      a.position_offset = offset;
      a.theta = 500000.0f;
      a.inverse = inverse;
    });
    expect_close(qkv, "qkv, inverse " + std::to_string(inverse));
    expect_close(k_out, "k out of place, inverse " + std::to_string(inverse));
  }
}

// x inside wider rows (the fused gate and up projections of a row of 2F + 5).
TEST_P(Parity, SwigluForwardAndBackward) {
  const int64_t N = 29, F = 347, ld = 2 * F + 5;
  Pair x = random({N, ld}, act(), -6.0f, 6.0f), out = filled({N, F}, act(), kNaN);
  auto gate_up = [&](Side s) { return x.strided(s, {N, 2 * F}, {ld, 1}); };
  run(&MH_KernelsApi::swiglu, [&](MH_SwigluArgs& a, Side s) {
    a.x = gate_up(s);
    a.out = out.on(s);
  });
  expect_close(out, "out");
  Pair dout = random({N, F}, act()), dx = filled({N, 2 * F}, act(), kNaN);
  run(&MH_KernelsApi::swiglu_bwd, [&](MH_SwigluArgs& a, Side s) {
    a.x = gate_up(s);
    a.dout = dout.on(s);
    a.dx = dx.on(s);
  });
  expect_close(dx, "dx");
}

TEST_P(Parity, AdamWStep) {
  const int64_t n = 10007;
  Pair param = random({n}, MH_F32), grad = random({n}, MH_F32, -0.1f, 0.1f);
  Pair m = random({n}, MH_F32, -0.01f, 0.01f), v = random({n}, MH_F32, 0.0f, 1e-4f);
  run(&MH_KernelsApi::adamw, [&](MH_AdamWArgs& a, Side s) {
    a.param = param.on(s);
    a.grad = grad.on(s);
    a.m = m.on(s);
    a.v = v.on(s);
    a.lr = 1e-3f;
    a.beta1 = 0.9f;
    a.beta2 = 0.95f;
    a.eps = 1e-8f;
    a.weight_decay = 0.1f;
    a.step = 3;
  });
  expect_close(param, "param");
  expect_close(m, "m");
  expect_close(v, "v");
}

TEST_P(Parity, SumSquaresAddsToOut) {
  for (int32_t dtype : act_and_f32()) {
    Pair x = random({300007}, dtype), out = filled({1}, MH_F32, 1.5f);
    run(&MH_KernelsApi::sum_squares, [&](MH_SumSquaresArgs& a, Side s) {
      a.x = x.on(s);
      a.out = out.on(s);
    });
    expect_close(out, "out");
  }
}

}  // namespace
}  // namespace mh::gpu_test
