// The shared checks' mixed-precision rules (plugins/kernels/common), seen
// through the dry kernels, which run the same checks as the cuda kernels: a
// bf16 component takes f32 parameters, gradients and statistics next to
// bf16 activations, but only bf16 GEMM inputs; an f32 component takes f32
// only; an output aliasing an input must share its dtype.
#include "dry_kernels.hpp"
#include "example_args.hpp"

namespace mh::kernels::test {
namespace {

using Dry = Instance<DryKernels>;

class MixedPrecision : public ::testing::Test {
 protected:
  MixedPrecision() : dry_(Overrides{{"dtype", "\"bf16\""}}), e_([&] { return buffer(); }) {}

  void* buffer() {
    void* ptr = nullptr;
    mh::check(dry_.api().alloc(dry_.self(), kExampleBufferBytes, &ptr), "alloc");
    return ptr;
  }

  Dry dry_;
  ExampleArgs e_;  // every float tensor f32
};

TEST_F(MixedPrecision, Bf16TakesF32ParametersNextToBf16Activations) {
  e_.layernorm.x.dtype = e_.layernorm.out.dtype = MH_BF16;
  dry_.run(&MH_KernelsApi::layernorm, e_.layernorm);
  e_.bias.x.dtype = e_.bias.out.dtype = MH_BF16;
  dry_.run(&MH_KernelsApi::bias_add, e_.bias);
  dry_.run(&MH_KernelsApi::bias_bwd, e_.bias);
  e_.embedding.out.dtype = MH_BF16;
  dry_.run(&MH_KernelsApi::embedding_bwd, e_.embedding);
}

TEST_F(MixedPrecision, Bf16GemmWritesBf16OrF32FromBf16Inputs) {
  e_.gemm.a.dtype = e_.gemm.b.dtype = MH_BF16;
  dry_.run(&MH_KernelsApi::gemm, e_.gemm);
  e_.gemm.c.dtype = MH_BF16;
  dry_.run(&MH_KernelsApi::gemm, e_.gemm);
  e_.gemm.b.dtype = MH_F32;
  const mh::ErrorPtr error = dry_.fails(&MH_KernelsApi::gemm, e_.gemm);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_UNIMPLEMENTED);
  EXPECT_STREQ(error->message, "gemm: b is f32, but this kernels component computes in bf16 only");
}

TEST_F(MixedPrecision, CopyBetweenDtypesIsAccepted) {
  e_.elementwise.op = MH_COPY;
  e_.elementwise.out.dtype = MH_BF16;
  dry_.run(&MH_KernelsApi::elementwise, e_.elementwise);
}

TEST_F(MixedPrecision, OtherFloatDtypesAreRefusedNamingTheTwoTaken) {
  e_.layernorm.x.dtype = MH_F16;
  const mh::ErrorPtr error = dry_.fails(&MH_KernelsApi::layernorm, e_.layernorm);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_UNIMPLEMENTED);
  EXPECT_STREQ(error->message, "layernorm: x is f16, but this kernels component takes bf16 or f32 here");
}

TEST_F(MixedPrecision, AnOutputAliasingAnInputSharesItsDtype) {
  e_.bias.out = e_.bias.x;
  e_.bias.x.dtype = MH_BF16;
  const mh::ErrorPtr error = dry_.fails(&MH_KernelsApi::bias_add, e_.bias);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_INVALID_ARGUMENT);
  EXPECT_STREQ(error->message, "bias_add: out aliases x but is f32 where x is bf16");
}

TEST(MixedPrecisionF32, AnF32ComponentTakesF32Only) {
  const Dry dry;
  ExampleArgs e([&] {
    void* ptr = nullptr;
    mh::check(dry.api().alloc(dry.self(), kExampleBufferBytes, &ptr), "alloc");
    return ptr;
  });
  e.layernorm.weight.dtype = MH_BF16;
  const mh::ErrorPtr error = dry.fails(&MH_KernelsApi::layernorm, e.layernorm);
  ASSERT_NE(error, nullptr);
  EXPECT_EQ(error->code, MH_UNIMPLEMENTED);
  EXPECT_STREQ(error->message, "layernorm: weight is bf16, but this kernels component computes in f32 only");
}

}  // namespace
}  // namespace mh::kernels::test
