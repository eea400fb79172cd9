#include "alloc_size.hpp"
#include "dry_kernels.hpp"
#include "example_args.hpp"

#include <deque>

namespace mh::kernels::test {
namespace {

using Dry = Instance<DryKernels>;

void* alloc(const Dry& dry, uint64_t bytes) {
  void* ptr = nullptr;
  mh::check(dry.api().alloc(dry.self(), bytes, &ptr), "alloc");
  return ptr;
}

TEST(DryAlloc, HandsOutDistinctAlignedAddressesNoProcessMaps) {
  const Dry dry;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (uint64_t bytes : {0ull, 1ull, 256ull, 1000ull, 1ull << 40}) {
    const auto address = reinterpret_cast<uint64_t>(alloc(dry, bytes));
    EXPECT_EQ(address % 256, 0u) << bytes;
    EXPECT_GE(address, uint64_t{1} << 62) << bytes;
    EXPECT_LT(address, uint64_t{1} << 63) << bytes;
    ranges.emplace_back(address, address + alloc_size(bytes));
  }
  for (size_t i = 0; i < ranges.size(); ++i)
    for (size_t j = i + 1; j < ranges.size(); ++j)
      EXPECT_TRUE(ranges[i].second <= ranges[j].first || ranges[j].second <= ranges[i].first) << i << ", " << j;
  for (const auto& range : ranges) dry.api().free(dry.self(), reinterpret_cast<void*>(range.first));
}

TEST(DryAlloc, TwoInstancesNeverShareAnAddress) {
  const Dry a, b;
  EXPECT_NE(alloc(a, 512), alloc(b, 512));
}

TEST(DryAlloc, AnImpossibleSizeIsResourceExhausted) {
  const Dry dry;
  for (uint64_t bytes : {UINT64_MAX, uint64_t{1} << 63}) {
    void* ptr = nullptr;
    const mh::ErrorPtr error(dry.api().alloc(dry.self(), bytes, &ptr));
    ASSERT_NE(error, nullptr) << bytes;
    EXPECT_EQ(error->code, MH_RESOURCE_EXHAUSTED) << error->message;
  }
}

TEST(DryCopy, DeviceToHostReadsZeros) {
  const Dry dry;
  std::vector<uint8_t> host(100, 0xAB);
  mh::check(dry.api().copy(dry.self(), host.data(), alloc(dry, 100), 100, MH_DEVICE_TO_HOST));
  EXPECT_EQ(host, std::vector<uint8_t>(100, 0));
}

TEST(DryCopy, OtherCopiesTouchNothing) {
  const Dry dry;
  const std::vector<uint8_t> host(100, 0xAB);
  void* device = alloc(dry, 100);
  mh::check(dry.api().copy(dry.self(), device, host.data(), 100, MH_HOST_TO_DEVICE));
  mh::check(dry.api().copy(dry.self(), alloc(dry, 100), device, 100, MH_DEVICE_TO_DEVICE));
  EXPECT_EQ(host, std::vector<uint8_t>(100, 0xAB));
}

// The tensors live at fake addresses: had any op touched one, the test would
// have crashed.
TEST(DryOps, EveryOpSucceedsOnFakeAddresses) {
  const Dry dry;
  run_every_op(dry, ExampleArgs([&] { return alloc(dry, kExampleBufferBytes); }));
  EXPECT_EQ(MH_FindExtension(dry.desc().extensions, MH_EXTENSION_STREAM), nullptr);
  mh::check(dry.api().synchronize(dry.self()));
}

TEST(DryOps, EveryOpLeavesRealMemoryUntouched) {
  std::deque<std::vector<uint8_t>> buffers;
  run_every_op(Dry(), ExampleArgs([&] { return buffers.emplace_back(kExampleBufferBytes, 0x5A).data(); }));
  for (const auto& buffer : buffers) EXPECT_EQ(buffer, std::vector<uint8_t>(kExampleBufferBytes, 0x5A));
}

TEST(DryDeviceInfo, IsDryWithTheConfiguredPeakAndDtype) {
  const MH_DeviceInfo info = Dry(Overrides{{"peak_gflops", "312"}, {"dtype", "\"bf16\""}}).device_info();
  EXPECT_EQ(info.dry, 1);
  EXPECT_DOUBLE_EQ(info.peak_flops, 312e9);
  EXPECT_EQ(info.compute_dtype, MH_BF16);
  EXPECT_EQ(info.memory_bytes, 0u);
}

TEST(DryDtype, ABf16DeviceTakesBf16AndRefusesF32) {
  const Dry dry(Overrides{{"dtype", "\"bf16\""}});
  ExampleArgs e([&] { return alloc(dry, kExampleBufferBytes); });
  const mh::ErrorPtr f32_error(dry.api().gemm(dry.self(), &e.gemm));
  ASSERT_NE(f32_error, nullptr);
  EXPECT_EQ(f32_error->code, MH_UNIMPLEMENTED);
  EXPECT_STREQ(f32_error->message, "gemm: a is f32, but this kernels component computes in bf16 only");
  e.gemm.a.dtype = e.gemm.b.dtype = e.gemm.c.dtype = MH_BF16;
  dry.run(&MH_KernelsApi::gemm, e.gemm);
}

}  // namespace
}  // namespace mh::kernels::test
