#include "example_args.hpp"
#include "machine.hpp"

#include <cstring>
#include <set>
#include <thread>

#ifdef __SANITIZE_ADDRESS__
// AnImpossibleSizeIsResourceExhausted needs malloc to fail as it does
// without ASan, whose default is to abort instead. ASAN_OPTIONS still wins.
extern "C" __attribute__((visibility("default"))) const char* __asan_default_options() {
  return "allocator_may_return_null=1";
}
#endif

namespace mh::kernels::test {
namespace {

void* alloc(const Cpu& cpu, uint64_t bytes) {
  void* ptr = nullptr;
  mh::check(cpu.api().alloc(cpu.self(), bytes, &ptr), "alloc");
  return ptr;
}

TEST(CpuAlloc, ReturnsAlignedDistinctWritableMemory) {
  const Cpu cpu;
  std::set<void*> seen;
  for (uint64_t bytes : {0ull, 1ull, 255ull, 256ull, 1000ull, 1ull << 20}) {
    void* ptr = alloc(cpu, bytes);
    ASSERT_NE(ptr, nullptr) << bytes;
    EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % 256, 0u) << bytes;
    EXPECT_TRUE(seen.insert(ptr).second) << bytes;
    std::memset(ptr, 0x11, bytes);
  }
  for (void* ptr : seen) cpu.api().free(cpu.self(), ptr);
  cpu.api().free(cpu.self(), nullptr);
}

TEST(CpuAlloc, AnImpossibleSizeIsResourceExhausted) {
  const Cpu cpu;
  for (uint64_t bytes : {UINT64_MAX, uint64_t{1} << 62}) {
    void* ptr = nullptr;
    const mh::ErrorPtr error(cpu.api().alloc(cpu.self(), bytes, &ptr));
    ASSERT_NE(error, nullptr) << bytes;
    EXPECT_EQ(error->code, MH_RESOURCE_EXHAUSTED) << error->message;
  }
}

TEST(CpuCopy, CopiesInEveryDirection) {
  const Cpu cpu;
  for (int32_t kind : {MH_HOST_TO_DEVICE, MH_DEVICE_TO_HOST, MH_DEVICE_TO_DEVICE}) {
    const std::vector<float> src = random_floats(333, 1);
    std::vector<float> dst(333);
    mh::check(cpu.api().copy(cpu.self(), dst.data(), src.data(), 333 * sizeof(float), kind));
    EXPECT_EQ(dst, src) << kind;
  }
}

TEST(CpuDeviceInfo, ReportsTheOptionsAndTheMachine) {
  const Instance<CpuKernels> cpu(Overrides{{"threads", "3"}, {"peak_gflops", "123"}});
  const MH_DeviceInfo info = cpu.device_info();  // info.name lives as long as the instance
  EXPECT_EQ(info.device_type, MH_DEVICE_CPU);
  EXPECT_EQ(info.threads, 3);
  EXPECT_DOUBLE_EQ(info.peak_flops, 123e9);
  EXPECT_GT(info.memory_bytes, 0u);
  EXPECT_EQ(info.compute_dtype, MH_F32);
  EXPECT_EQ(info.dry, 0);
  EXPECT_EQ(std::string(info.name).rfind("cpu: ", 0), 0u) << info.name;
}

TEST(CpuDeviceInfo, AutoThreadsSplitThePhysicalCoresBetweenRanks) {
  for (int32_t ranks : {1, 2, 64}) {
    const MH_DeviceInfo info = Instance<CpuKernels>(Overrides{{"peak_gflops", "1"}}, ranks).device_info();
    EXPECT_EQ(info.threads, std::max(1, cpu::physical_cores() / ranks)) << ranks;
  }
}

TEST(CpuDeviceInfo, MeasuresThePeakWhenNotGiven) {
  const MH_DeviceInfo info = Instance<CpuKernels>(Overrides{{"threads", "1"}}).device_info();
  EXPECT_GT(info.peak_flops, 1e9);
  EXPECT_LT(info.peak_flops, 1e13);
}

// Every op runs before it returns: no stream to order work after.
TEST(CpuKernels, HasNoStreamExtensionAndSynchronizeSucceeds) {
  const Cpu cpu;
  EXPECT_EQ(MH_FindExtension(cpu.desc().extensions, MH_EXTENSION_STREAM), nullptr);
  mh::check(cpu.api().synchronize(cpu.self()));
}

// Ranks of the threads communicator: one instance each, created on the main
// thread (abi.h rule 4) and called at the same time from the ranks' own
// threads, must not disturb each other.
TEST(CpuKernels, RanksOnThreadsComputeConcurrently) {
  constexpr int64_t n = 96;
  std::vector<float> a = random_floats(n * n, 1), b = random_floats(n * n, 2), expected(n * n);
  auto gemm_args = [&](std::vector<float>& c) {
    MH_GemmArgs args{};
    args.struct_size = MH_STRUCT_SIZE(MH_GemmArgs, beta);
    args.a = view(a, {1, n, n});
    args.b = view(b, {1, n, n});
    args.c = view(c, {1, n, n});
    args.alpha = 1.0f;
    return args;
  };
  Cpu(1).run(&MH_KernelsApi::gemm, gemm_args(expected));
  const Cpu instances[2] = {Cpu(1), Cpu(1)};
  std::vector<float> results[2];
  std::vector<std::thread> ranks;
  for (int rank = 0; rank < 2; ++rank)
    ranks.emplace_back([&, rank] {
      results[rank].assign(n * n, 0.0f);
      for (int rep = 0; rep < 20; ++rep) instances[rank].run(&MH_KernelsApi::gemm, gemm_args(results[rank]));
    });
  for (std::thread& t : ranks) t.join();
  for (const auto& result : results) EXPECT_TRUE(all_close(result, expected, 1e-6, 1e-6));
}

}  // namespace
}  // namespace mh::kernels::test
