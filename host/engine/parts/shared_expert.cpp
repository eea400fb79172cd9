#include "engine/parts/shared_expert.hpp"

#include <cmath>

#include "engine/ops.hpp"

namespace mh {
namespace {

constexpr auto kAct = MemCategory::kActivations;
constexpr auto kWork = MemCategory::kWorkspace;

// [rows, 1, cols] row by row, for products that pair row i of one matrix
// with row i of another.
MH_Tensor row_batch(void* data, int32_t dtype, int64_t rows, int64_t cols) {
  return view(data, dtype, {rows, 1, cols}, {cols, cols, 1});
}

}  // namespace

SharedExpertPart::SharedExpertPart(const PartContext& c) : c_(c) {}

int64_t SharedExpertPart::gate_grad_elements() const { return c_.d.spec.shared_expert_gate ? c_.d.local_rows() : 0; }

MH_Tensor SharedExpertPart::half(TypedPtr fc1, int64_t first) const {
  return view((fc1 + first).data, fc1.dtype, {1, c_.d.local_rows(), width()}, {0, 2 * width(), 1});
}

void SharedExpertPart::fc1(TypedPtr in, TypedPtr fc1, const LayerParamIds& w) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, fs = width();
  ops::gemm(c_.dev, in.t({1, N, h}), c_.P(w.shared_gate_w).t({1, fs, h}), half(fc1, 0), false, true, 0);
  ops::gemm(c_.dev, in.t({1, N, h}), c_.P(w.shared_fc1_w).t({1, fs, h}), half(fc1, fs), false, true, 0);
}

// The logits go through the host as the router's do: a [rows] vector.
void SharedExpertPart::gate(TypedPtr in, const LayerParamIds& w, const LayerPass& pass, MoeRouting& r) const {
  if (w.shared_expert_gate_w < 0) return;
  const int64_t N = c_.d.local_rows();
  Buffer logits(c_.dev, kWork, N);
  ops::linear(c_.dev, in, c_.P(w.shared_expert_gate_w), logits.ptr(), N, c_.d.hidden, 1);
  r.shared_gate_host.assign(size_t(N), 0.5f);
  if (!c_.dev.info().dry) {
    c_.dev.to_host(r.shared_gate_host.data(), logits.data(), size_t(N) * sizeof(float));
    for (float& v : r.shared_gate_host) v = float(1 / (1 + std::exp(-double(v))));
  }
  c_.dev.to_device(logits.data(), r.shared_gate_host.data(), size_t(N) * sizeof(float));
  r.shared_gate = c_.activation(pass.inference ? kWork : kAct, N);
  ops::copy(c_.dev, logits.ptr(), r.shared_gate.ptr(), N);
}

void SharedExpertPart::output(const MoeRouting& r, TypedPtr act, const LayerParamIds& w, float* partial) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden;
  if (w.shared_expert_gate_w < 0) {
    ops::linear(c_.dev, act, c_.P(w.shared_fc2_w), TypedPtr(partial), N, width(), h, 1);
    return;
  }
  Buffer y = c_.activation(kWork, N * h);
  ops::linear(c_.dev, act, c_.P(w.shared_fc2_w), y.ptr(), N, width(), h);
  ops::gemm(c_.dev, row_batch(r.shared_gate.data(), r.shared_gate.dtype(), N, 1), row_batch(y.data(), y.dtype(), N, h),
            row_batch(partial, MH_F32, N, h), false, false, 1);
}

// With s = sigmoid(z), out = s y: the shared output's gradient is s dy, and
// dz = s (1 - s) (dy . y).
void SharedExpertPart::output_bwd(const MoeRouting& r, TypedPtr act, const LayerParamIds& w, TypedPtr dy,
                                  TypedPtr dact, TypedPtr dz) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, fs = width();
  if (w.shared_expert_gate_w < 0) {
    ops::linear_dx(c_.dev, dy, c_.P(w.shared_fc2_w), dact, N, fs, h);
    ops::linear_dw(c_.dev, dy, act, TypedPtr(c_.G(w.shared_fc2_w)), N, fs, h);
    return;
  }
  Buffer dys = c_.activation(kWork, N * h);
  ops::gemm(c_.dev, row_batch(r.shared_gate.data(), r.shared_gate.dtype(), N, 1), row_batch(dy.data, dy.dtype, N, h),
            row_batch(dys.data(), dys.dtype(), N, h), false, false, 0);
  ops::linear_dx(c_.dev, dys.ptr(), c_.P(w.shared_fc2_w), dact, N, fs, h);
  ops::linear_dw(c_.dev, dys.ptr(), act, TypedPtr(c_.G(w.shared_fc2_w)), N, fs, h);
  dys.release();
  Buffer y = c_.activation(kWork, N * h);
  ops::linear(c_.dev, act, c_.P(w.shared_fc2_w), y.ptr(), N, fs, h);
  Buffer dot(c_.dev, kWork, N);
  ops::gemm(c_.dev, row_batch(dy.data, dy.dtype, N, h), row_batch(y.data(), y.dtype(), N, h),
            row_batch(dot.data(), MH_F32, N, 1), false, true, 0);
  std::vector<float> d(size_t(N), 0);
  if (!c_.dev.info().dry) {
    c_.dev.to_host(d.data(), dot.data(), d.size() * sizeof(float));
    for (size_t i = 0; i < d.size(); ++i) {
      const double s = r.shared_gate_host[i];
      d[i] = float(double(d[i]) * s * (1 - s));
    }
  }
  c_.dev.to_device(dot.data(), d.data(), d.size() * sizeof(float));
  ops::copy(c_.dev, dot.ptr(), dz, N);
}

void SharedExpertPart::backward(TypedPtr in, TypedPtr dfc1, TypedPtr dz, const LayerParamIds& w, float* dx) const {
  const int64_t N = c_.d.local_rows(), h = c_.d.hidden, fs = width();
  for (const auto& [weight, first] : {std::pair{w.shared_gate_w, int64_t(0)}, std::pair{w.shared_fc1_w, fs}}) {
    const MH_Tensor dy = half(dfc1, first);
    if (c_.G(weight) != nullptr)  // a frozen base computes no gradient of its own
      ops::gemm(c_.dev, dy, in.t({1, N, h}), TypedPtr(c_.G(weight)).t({1, fs, h}), true, false, 1);
    ops::gemm(c_.dev, dy, c_.P(weight).t({1, fs, h}), TypedPtr(dx).t({1, N, h}), false, false, 1);
  }
  if (w.shared_expert_gate_w < 0) return;
  ops::linear_dw(c_.dev, dz, in, TypedPtr(c_.G(w.shared_expert_gate_w)), N, h, 1);
  ops::linear_dx(c_.dev, dz, c_.P(w.shared_expert_gate_w), TypedPtr(dx), N, h, 1, 1);
}

}  // namespace mh
