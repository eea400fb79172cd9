// The fixture of the parity tests: every op runs on the cpu kernels (the
// reference, f32 on host memory) and on the cuda kernels (device memory, in
// the dtype under test) with the same inputs, and the outputs are compared.
// Outputs start as NaN where the op writes them whole, so an element the
// device never writes fails the comparison.
#pragma once

#include "gpu_harness.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

namespace mh::gpu_test {

enum class Side { kCpu, kGpu };

// The error of an output relative to its scale, max |gpu - cpu| / max |cpu|,
// allowed for: everything fp32; f32 outputs computed from bf16 inputs (the
// cpu sees the same bf16-rounded values); bf16 outputs (8-bit mantissa).
inline constexpr double kFp32Tolerance = 1e-5;
inline constexpr double kF32FromBf16Tolerance = 1e-3;
inline constexpr double kBf16Tolerance = 1e-2;

inline bool is_float(int32_t dtype) { return dtype == MH_F32 || dtype == MH_BF16; }

// Every element written (no NaN where the cpu has a number) and within
// `tolerance` of the cpu's output relative to its largest magnitude.
inline ::testing::AssertionResult close(const std::vector<float>& gpu, const std::vector<float>& cpu,
                                        double tolerance) {
  if (gpu.size() != cpu.size()) return ::testing::AssertionFailure() << "sizes differ";
  double scale = 0, worst = 0;
  size_t worst_at = 0, unwritten = 0;
  for (float v : cpu) scale = std::max(scale, double(std::abs(v)));
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (std::isnan(gpu[i]) != std::isnan(cpu[i])) {
      ++unwritten;
      continue;
    }
    const double diff = std::isnan(gpu[i]) ? 0.0 : std::abs(double(gpu[i]) - double(cpu[i]));
    if (diff > worst) {
      worst = diff;
      worst_at = i;
    }
  }
  const double error = worst / std::max(scale, 1e-30);
  if (unwritten == 0 && error <= tolerance) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "relative error " << error << " (allowed " << tolerance << "), worst at ["
                                       << worst_at << "]: " << gpu[worst_at] << " vs " << cpu[worst_at] << "; "
                                       << unwritten << " of " << gpu.size()
                                       << " elements NaN on one side only (never written?)";
}

// One tensor given to both components: f32 (or i32, u8) host memory for the
// cpu kernels, device memory of `dtype` for the cuda kernels, both holding
// the same values (rounded to bf16 first where the device holds bf16).
class Pair {
 public:
  Pair(const Kernels& gpu, std::vector<int64_t> shape, int32_t dtype, const std::vector<float>& values)
      : shape_(std::move(shape)),
        dtype_(dtype),
        host_dtype_(is_float(dtype) ? MH_F32 : dtype),
        host_(encode(decode(encode(values, dtype), dtype), host_dtype_)),
        device_(gpu, values.size() * dtype_size(dtype)) {
    device_.upload(encode(values, dtype));
  }

  MH_Tensor on(Side side) {
    return side == Side::kCpu ? view(host_.data(), host_dtype_, shape_) : device_.view(dtype_, shape_);
  }
  // A view with its own shape and strides, starting `offset` elements in.
  MH_Tensor strided(Side side, const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                    int64_t offset = 0) {
    MH_Tensor t = on(side);
    t.data = static_cast<char*>(t.data) + offset * int64_t(dtype_size(t.dtype));
    t.ndim = static_cast<int32_t>(shape.size());
    for (size_t i = 0; i < shape.size(); ++i) {
      t.shape[i] = shape[i];
      t.strides[i] = strides[i];
    }
    return t;
  }
  std::vector<float> cpu() const { return decode(host_, host_dtype_); }
  std::vector<float> gpu() const { return decode(device_.download(), dtype_); }
  int32_t dtype() const { return dtype_; }

 private:
  std::vector<int64_t> shape_;
  int32_t dtype_, host_dtype_;
  std::vector<uint8_t> host_;
  DeviceBuffer device_;
};

inline int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// Parameterised by the cuda kernels' dtype option: "fp32" or "bf16".
class Parity : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    CudaOrReason cuda = open_cuda({{"dtype", "\"" + GetParam() + "\""}, {"peak_tflops", "1"}});
    if (!cuda.kernels) GTEST_SKIP() << cuda.reason;
    gpu_ = std::move(cuda.kernels);
    const MH_ComponentDesc& desc = only_component(MH_KERNELS_CPU_MODULE);
    Created c = create(desc, {{"threads", "2"}, {"peak_gflops", "1"}});
    mh::check(c.error.release(), "create kernels cpu");
    cpu_ = std::make_unique<Kernels>(desc, c.self, Placement{});
    seed_ = std::random_device{}();
    gen_.seed(seed_);
  }

  bool bf16() const { return GetParam() == "bf16"; }
  // The dtype of activations and GEMM inputs.
  int32_t act() const { return bf16() ? MH_BF16 : MH_F32; }
  // Where a tensor may hold either (outputs of GEMMs, gradients): both.
  std::vector<int32_t> act_and_f32() const {
    return bf16() ? std::vector<int32_t>{MH_BF16, MH_F32} : std::vector<int32_t>{MH_F32};
  }

  Pair values(std::vector<int64_t> shape, int32_t dtype, const std::vector<float>& v) {
    return Pair(*gpu_, std::move(shape), dtype, v);
  }
  Pair random(std::vector<int64_t> shape, int32_t dtype, float lo = -1.0f, float hi = 1.0f) {
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(numel(shape)));
    for (float& x : v) x = dist(gen_);
    return values(std::move(shape), dtype, v);
  }
  Pair integers(std::vector<int64_t> shape, int32_t lo, int32_t hi) {
    std::uniform_int_distribution<int32_t> dist(lo, hi);
    std::vector<float> v(static_cast<size_t>(numel(shape)));
    for (float& x : v) x = static_cast<float>(dist(gen_));
    return values(std::move(shape), MH_I32, v);
  }
  Pair filled(std::vector<int64_t> shape, int32_t dtype, float value) {
    return values(shape, dtype, std::vector<float>(static_cast<size_t>(numel(shape)), value));
  }
  uint64_t seed() const { return seed_; }

  // Runs `op` on both components with the arguments fill(args, side) sets.
  template <class Args, class Fill>
  void run(Op<Args> op, Fill fill) {
    Args cpu_args{}, gpu_args{};
    cpu_args.struct_size = gpu_args.struct_size = sizeof(Args);
    fill(cpu_args, Side::kCpu);
    fill(gpu_args, Side::kGpu);
    cpu_->run(op, cpu_args);
    gpu_->run(op, gpu_args);
    gpu_->synchronize();
  }

  void expect_close(const Pair& t, const std::string& name) {
    const double tolerance = !bf16() ? kFp32Tolerance : t.dtype() == MH_BF16 ? kBf16Tolerance : kF32FromBf16Tolerance;
    EXPECT_TRUE(close(t.gpu(), t.cpu(), tolerance)) << name << " (" << GetParam() << ", seed " << seed_ << ")";
  }
  void expect_equal(const Pair& t, const std::string& name) {
    EXPECT_EQ(t.gpu(), t.cpu()) << name << " (" << GetParam() << ", seed " << seed_ << ")";
  }

  std::unique_ptr<Kernels> gpu_, cpu_;

 private:
  uint32_t seed_ = 0;
  std::mt19937 gen_;
};

}  // namespace mh::gpu_test
