// A kernels plugin built against ABI 1.2 (tests/fixtures/kernels_1_2.cpp):
// it loads, GPT-2 trains with it, and the host names each 1.3 and 1.4 op it
// lacks instead of calling past the end of its table.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "engine/device.hpp"
#include "engine/ops.hpp"
#include "megahost_process.hpp"
#include "support/engine_env.hpp"

namespace mh::host::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr const char* kOlderKernels = "[kernels]\nplugin = \"cpu_1_2\"\npeak_gflops = 50\n";

TEST(OlderKernels, IsListedWithTheAbiItWasBuiltFor) {
  Outcome o = run_megahost({"--plugin_path", fixture("kernels_1_2"), "--list_plugins"});
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(listed(o.out, "kernels", "cpu_1_2"),
              ElementsAre("kernels", "cpu_1_2", "0.1.0", "1.2", fixture("kernels_1_2") + "/mh_kernels_1_2.so"));
}

TEST(OlderKernels, Gpt2TrainsAndDryRunsWithIt) {
  mh::data::testing::TempDir dir;
  for (const char* mode : {"train.steps=2", "--dry_run"}) {
    SCOPED_TRACE(mode);
    std::vector<std::string> args{"--plugin_path", fixture("kernels_1_2"), "--config", dir.write("run.toml", kOlderKernels),
                                  mode, "output.metrics=" + dir.file("metrics.jsonl")};
    for (const auto& o : tiny_run()) args.push_back(o);
    Outcome o = run_megahost(args);
    EXPECT_EQ(o.status, 0) << o.err;
  }
}

TEST(OlderKernels, GenerationIsRefusedBeforeAnythingRunsNamingTheOp) {
  mh::data::testing::TempDir dir;
  std::vector<std::string> args{"--plugin_path", fixture("kernels_1_2"), "--config",
                                dir.write("run.toml", std::string(kOlderKernels) + "[generate]\nprompt = \"Hi\"\n")};
  for (const auto& o : tiny_run()) args.push_back(o);
  Outcome o = run_megahost(args);
  EXPECT_EQ(o.status, 2) << o.err;
  EXPECT_THAT(o.err, HasSubstr("kernels plugin \"cpu_1_2\" (ABI 1.2) has no strided_copy, which [generate] (its KV "
                               "cache) needs; rebuild the plugin against SDK 1.4 or later"));
}

class OlderKernelsDevice : public ::testing::Test {
 protected:
  OlderKernelsDevice() : env_(kOlderKernels, {}, {fixture("kernels_1_2")}), kernels_(env_.slot(MH_KIND_KERNELS), 1, 0) {}

  mh::test::EngineEnv env_;
  Instance kernels_;
};

std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), MH_INVALID_ARGUMENT) << e.what();
    return e.what();
  }
  return "(nothing thrown)";
}

TEST_F(OlderKernelsDevice, RequireOpNamesTheMissingOpAndTheKeyThatNeedsIt) {
  Device dev(kernels_);
  EXPECT_NO_THROW(dev.require_op(&MH_KernelsApi::layernorm, "layernorm", "model.normalization = \"layernorm\""));
  EXPECT_EQ(message_of([&] {
              dev.require_op(&MH_KernelsApi::rmsnorm, "rmsnorm", "model.normalization = \"rmsnorm\"");
            }),
            "kernels plugin \"cpu_1_2\" (ABI 1.2) has no rmsnorm, which model.normalization = \"rmsnorm\" needs; "
            "rebuild the plugin against SDK 1.3 or later");
}

// The fixture's 1.3 and 1.4 slots abort: reaching this test's end shows the
// host never called them.
TEST_F(OlderKernelsDevice, RunningAnOpPastTheTableFailsWithoutCallingIt) {
  Device dev(kernels_);
  Buffer x(dev, MemCategory::kWorkspace, 8), out(dev, MemCategory::kWorkspace, 4);
  EXPECT_EQ(message_of([&] { ops::swiglu(dev, x.ptr(), out.ptr(), 2, 2); }),
            "kernels plugin \"cpu_1_2\" (ABI 1.2) has no swiglu; rebuild the plugin against SDK 1.3 or later");
  EXPECT_THAT(message_of([&] { ops::rope(dev, x.t({1, 2, 4}), 0, MH_Tensor{}, 10000.0f, false); }),
              HasSubstr("has no rope"));
  EXPECT_THAT(message_of([&] { ops::strided_copy(dev, x.t({1, 1, 4}), out.t({1, 1, 4})); }),
              HasSubstr("kernels plugin \"cpu_1_2\" (ABI 1.2) has no strided_copy"));
}

TEST(CurrentKernels, HaveEveryOpOfAbi14) {
  mh::test::EngineEnv env("[kernels]\npeak_gflops = 50\n");
  Instance kernels(env.slot(MH_KIND_KERNELS), 1, 0);
  Device dev(kernels);
  EXPECT_NO_THROW(dev.require_op(&MH_KernelsApi::rmsnorm, "rmsnorm", ""));
  EXPECT_NO_THROW(dev.require_op(&MH_KernelsApi::rmsnorm_bwd, "rmsnorm_bwd", ""));
  EXPECT_NO_THROW(dev.require_op(&MH_KernelsApi::rope, "rope", ""));
  EXPECT_NO_THROW(dev.require_op(&MH_KernelsApi::swiglu, "swiglu", ""));
  EXPECT_NO_THROW(dev.require_op(&MH_KernelsApi::swiglu_bwd, "swiglu_bwd", ""));
  EXPECT_NO_THROW(dev.require_op(&MH_KernelsApi::strided_copy, "strided_copy", ""));
}

// ops::strided_copy fills the args the 1.4 op reads: two new [2, 1, 3] rows
// land at position 1 of a [2, 3, 3] cache.
TEST(CurrentKernels, StridedCopyAppendsToACache) {
  mh::test::EngineEnv env("[kernels]\npeak_gflops = 50\n");
  Instance kernels(env.slot(MH_KIND_KERNELS), 1, 0);
  Device dev(kernels);
  Buffer fresh(dev, MemCategory::kWorkspace, 6), cache(dev, MemCategory::kWorkspace, 18);
  for (int i = 0; i < 6; ++i) fresh.f32()[i] = float(i + 1);
  for (int i = 0; i < 18; ++i) cache.f32()[i] = 0.0f;
  MH_Tensor at_1 = cache.t({2, 1, 3});
  at_1.data = cache.f32() + 3;
  at_1.strides[0] = 9;
  ops::strided_copy(dev, fresh.t({2, 1, 3}), at_1);
  dev.synchronize();
  EXPECT_EQ(std::vector<float>(cache.f32(), cache.f32() + 18),
            (std::vector<float>{0, 0, 0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 4, 5, 6, 0, 0, 0}));
}

}  // namespace
}  // namespace mh::host::testing
