// The cuda kernels as a device: what device_info reports, memory (alignment,
// reuse, exhaustion), copies, and refusals shared with every kernels
// component. Skipped without a CUDA device.
#include "gpu_harness.hpp"

#include <gtest/gtest.h>

namespace mh::gpu_test {
namespace {

class CudaDevice : public ::testing::Test {
 protected:
  void open(const Overrides& overrides) {
    CudaOrReason cuda = open_cuda(overrides);
    if (!cuda.kernels) GTEST_SKIP() << cuda.reason;
    gpu_ = std::move(cuda.kernels);
  }
  std::unique_ptr<Kernels> gpu_;
};

TEST_F(CudaDevice, ReportsTheDeviceTheDtypeAndTheGivenPeak) {
  for (const char* dtype : {"bf16", "fp32"}) {
    open({{"dtype", std::string("\"") + dtype + "\""}, {"peak_tflops", "123"}});
    if (IsSkipped()) return;
    const MH_DeviceInfo info = gpu_->device_info();
    EXPECT_EQ(info.device_type, MH_DEVICE_CUDA);
    EXPECT_EQ(info.compute_dtype, std::string(dtype) == "bf16" ? MH_BF16 : MH_F32);
    EXPECT_DOUBLE_EQ(info.peak_flops, 123e12);
    EXPECT_GT(info.memory_bytes, 0u);
    EXPECT_EQ(info.dry, 0);
    EXPECT_EQ(std::string(info.name).rfind("cuda: ", 0), 0u) << info.name;
    EXPECT_NE(gpu_->stream(), nullptr) << "its ops are enqueued: the stream is an extension";
  }
}

TEST_F(CudaDevice, MeasuresAGemmPeakWhenNoneIsGiven) {
  open({});
  if (IsSkipped()) return;
  EXPECT_GT(gpu_->device_info().peak_flops, 1e12) << "any CUDA device of sm_80 or later does over 1 TFLOP/s in bf16";
}

TEST_F(CudaDevice, AllocationsAreAlignedAndFreedBlocksReused) {
  open({{"peak_tflops", "1"}});
  if (IsSkipped()) return;
  void* first = gpu_->alloc(1000);
  void* second = gpu_->alloc(1000);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(first) % 256, 0u);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(second) % 256, 0u);
  EXPECT_NE(first, second);
  gpu_->free(second);
  EXPECT_EQ(gpu_->alloc(900), second) << "a freed block serves the next request of its size class";
  gpu_->free(first);
  gpu_->free(second);
  gpu_->free(nullptr);
}

TEST_F(CudaDevice, ExhaustionIsResourceExhaustedAndLeavesTheDeviceUsable) {
  open({{"peak_tflops", "1"}, {"dtype", "\"fp32\""}});
  if (IsSkipped()) return;
  void* ptr = nullptr;
  mh::ErrorPtr error(gpu_->api().alloc(gpu_->self(), uint64_t{1} << 50, &ptr));
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_RESOURCE_EXHAUSTED) << error->message;
  DeviceBuffer buffer(*gpu_, 64 * sizeof(float));
  MH_ElementwiseArgs fill{};
  fill.struct_size = sizeof(fill);
  fill.op = MH_FILL;
  fill.out = buffer.view(MH_F32, {64});
  fill.alpha = 2.0f;
  gpu_->run(&MH_KernelsApi::elementwise, fill);
  EXPECT_EQ(decode(buffer.download(), MH_F32), std::vector<float>(64, 2.0f));
}

TEST_F(CudaDevice, CopiesRoundTripThroughTheDevice) {
  open({{"peak_tflops", "1"}});
  if (IsSkipped()) return;
  std::vector<uint8_t> data(4099), back(4099, 0);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<uint8_t>(i * 7);
  DeviceBuffer a(*gpu_, data.size()), b(*gpu_, data.size());
  gpu_->copy(a.data(), data.data(), data.size(), MH_HOST_TO_DEVICE);
  gpu_->copy(b.data(), a.data(), data.size(), MH_DEVICE_TO_DEVICE);
  gpu_->copy(back.data(), b.data(), data.size(), MH_DEVICE_TO_HOST);
  EXPECT_EQ(back, data);
}

// The checks are the shared ones (plugins/kernels/common): same code and
// message as the cpu and dry kernels.
TEST_F(CudaDevice, RefusesGemmInputsOfAnotherDtype) {
  open({{"peak_tflops", "1"}, {"dtype", "\"bf16\""}});
  if (IsSkipped()) return;
  DeviceBuffer buffer(*gpu_, 1024);
  MH_GemmArgs g{};
  g.struct_size = sizeof(g);
  g.a = buffer.view(MH_F32, {1, 4, 4});
  g.b = buffer.view(MH_BF16, {1, 4, 4});
  g.c = buffer.view(MH_F32, {1, 4, 4});
  const mh::ErrorPtr error = gpu_->fails(&MH_KernelsApi::gemm, g);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_UNIMPLEMENTED);
  EXPECT_STREQ(error->message, "gemm: a is f32, but this kernels component computes in bf16 only");
}

// Host memory handed to the device's kernels (a view that says cpu) is
// refused by name before any kernel reads it; so is another device's.
TEST_F(CudaDevice, RefusesATensorOnAnotherDevice) {
  open({{"peak_tflops", "1"}, {"dtype", "\"fp32\""}});
  if (IsSkipped()) return;
  DeviceBuffer buffer(*gpu_, 64 * sizeof(float));
  std::vector<float> host(64, 1.0f);
  MH_ElementwiseArgs add{};
  add.struct_size = sizeof(add);
  add.op = MH_ADD;
  add.x = view(host.data(), MH_F32, {64});
  add.y = add.out = buffer.view(MH_F32, {64});
  mh::ErrorPtr error = gpu_->fails(&MH_KernelsApi::elementwise, add);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_INVALID_ARGUMENT);
  EXPECT_STREQ(error->message,
               "elementwise: x is on cpu, but this kernels component works on cuda:0 (MH_Tensor.device, "
               "device_id): copy it there first");
  add.x = placed(buffer.view(MH_F32, {64}), {MH_DEVICE_CUDA, 1});
  error = gpu_->fails(&MH_KernelsApi::elementwise, add);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_INVALID_ARGUMENT);
}

}  // namespace
}  // namespace mh::gpu_test
