// The 1.x adapter in process: plugins built with the ABI 1.8 SDK
// (tests/fixtures: kernels_v1, planners_v1, older_minor, older_tuner) loaded
// by the host's loader, each component called through the 2.0 table the
// registry holds, as the engine calls it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <megahost/conformance.hpp>
#include <string>
#include <vector>

#include "megahost_process.hpp"
#include "plugins/plugin_loader.hpp"
#include "plugins/registry.hpp"

namespace mh::host::testing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

// An instance of the component with `options` ("name=value") set.
struct Made {
  Made(const MH_ComponentDesc& c, const std::vector<std::string>& options)
      : desc(c), values(c, options), created(c, values.get(), 1, 0) {}
  template <class Api>
  const Api& api() const {
    return *static_cast<const Api*>(desc.api);
  }
  MH_Instance* get() const { return created.get(); }
  const MH_ComponentDesc& desc;
  mh::conformance::ComponentOptions values;
  mh::conformance::Created created;
};

// The plugins of the 1.x fixtures, loaded and registered as the host does.
class Abi1Adapter : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    plugins_ = new std::vector<LoadedPlugin>(
        load_plugins({fixture("kernels_v1"), fixture("kernels_v1_4"), fixture("planners_v1"), fixture("comm_v1"),
                      fixture("older_minor"), fixture("older_tuner")},
                     diag_));
    registry_ = new Registry(*plugins_, diag_);
  }
  static void TearDownTestSuite() {
    delete registry_;
    delete plugins_;
  }

  static const MH_ComponentDesc& component(int32_t kind, const std::string& name) {
    const Component* c = registry_->find(kind, name);
    if (c == nullptr) throw std::runtime_error("no " + std::string(kind_name(kind)) + " " + name);
    return *c->desc;
  }

  static inline Diagnostics diag_;
  static inline std::vector<LoadedPlugin>* plugins_ = nullptr;
  static inline Registry* registry_ = nullptr;
};

MH_ModelShape shape() {
  MH_ModelShape s{};
  s.struct_size = sizeof(s);
  s.layers = 7, s.hidden = 64, s.heads = 4, s.ffn_hidden = 256, s.seq_len = 32, s.vocab = 256;
  s.micro_batch = 1, s.global_batch = 9, s.world_size = 2;
  return s;
}

TEST_F(Abi1Adapter, LoadsEveryFixtureWithoutAProblem) { EXPECT_FALSE(diag_.has_errors()) << diag_.report(); }

// ------------------------------------------------------------------------
// Kernels
// ------------------------------------------------------------------------

TEST_F(Abi1Adapter, AdaptedKernelsPassTheSdksConformanceChecks) {
  const MH_ComponentDesc& c = component(MH_KIND_KERNELS, "naive_v1");
  const mh::conformance::ComponentOptions options(c, {});
  EXPECT_THAT(mh::conformance::check_kernels(c, options.get()), IsEmpty());
}

// The table has 1.8's ops and no others; the stream is an extension; the
// capabilities are the table's own (1.5 on) or derived from strided_copy.
TEST_F(Abi1Adapter, AdaptedKernelsHaveThe18OpsTheStreamAsAnExtensionAndTheirCapabilities) {
  const MH_ComponentDesc& c = component(MH_KIND_KERNELS, "naive_v1");
  const auto& k = *static_cast<const MH_KernelsApi*>(c.api);
  EXPECT_NE(k.gemm, nullptr);
  EXPECT_NE(k.strided_copy, nullptr);
  EXPECT_EQ(k.rmsnorm, nullptr);
  EXPECT_EQ(k.attention, nullptr);
  EXPECT_EQ(k.capabilities, uint64_t{MH_KERNELS_CAP_PARTIAL_SOFTMAX | MH_KERNELS_CAP_DOCUMENTS});
  const auto* stream = reinterpret_cast<const MH_StreamExtension*>(MH_FindExtension(c.extensions, MH_EXTENSION_STREAM));
  ASSERT_NE(stream, nullptr);
  Made made(c, {});
  EXPECT_EQ(stream->stream(made.get()), nullptr);  // a CPU's: none

  const auto& older = *static_cast<const MH_KernelsApi*>(component(MH_KIND_KERNELS, "naive_v1_4").api);
  EXPECT_EQ(older.capabilities, uint64_t{MH_KERNELS_CAP_PARTIAL_SOFTMAX});
}

// A view of host floats (the CPU is device 0 of type 0, what a zeroed
// tensor says).
MH_Tensor view(void* data, int32_t dtype, std::vector<int64_t> shape) {
  MH_Tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = int32_t(shape.size());
  int64_t stride = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i)
    t.shape[i] = shape[size_t(i)], t.strides[i] = stride, stride *= shape[size_t(i)];
  return t;
}

// Softmax's starts is its args' last tensor, optional by struct_size: the
// converted 1.x args carry it when the caller's struct reaches it (row 1's
// document starting at column 1 sees only itself) and leave it out when it
// does not (row 1 sees both columns).
TEST_F(Abi1Adapter, AnOptionalTensorReachesThe1xOpOnlyWhenTheCallersStructSizeReachesIt) {
  Made k(component(MH_KIND_KERNELS, "naive_v1"), {});
  std::vector<float> x(4, 0.0f), out(4, -1.0f);
  std::vector<int32_t> starts{0, 1};
  MH_SoftmaxArgs a{};
  a.struct_size = sizeof(a);
  a.x = view(x.data(), MH_F32, {1, 2, 2});
  a.out = view(out.data(), MH_F32, {1, 2, 2});
  a.scale = 1.0f;
  a.starts = view(starts.data(), MH_I32, {1, 2});
  check(k.api<MH_KernelsApi>().softmax(k.get(), &a));
  EXPECT_THAT(out, ElementsAre(1.0f, 0.0f, 0.0f, 1.0f));
  a.struct_size = MH_STRUCT_SIZE(MH_SoftmaxArgs, scale);
  check(k.api<MH_KernelsApi>().softmax(k.get(), &a));
  EXPECT_THAT(out, ElementsAre(1.0f, 0.0f, 0.5f, 0.5f));
}

// ------------------------------------------------------------------------
// Comm: groups, requests and the collectives' args
// ------------------------------------------------------------------------

TEST_F(Abi1Adapter, AdaptedCommunicatorPassesTheSdksConformanceChecks) {
  const MH_ComponentDesc& c = component(MH_KIND_COMM, "single_v1");
  const mh::conformance::ComponentOptions options(c, {});
  EXPECT_THAT(mh::conformance::check_comm(c, options.get()), IsEmpty());
}

// A split group and a non-blocking collective are the adapter's wrappers
// around the 1.x ones, released with them.
TEST_F(Abi1Adapter, AdaptedCommunicatorSplitsAndRunsNonBlockingCollectives) {
  Made comm(component(MH_KIND_COMM, "single_v1"), {});
  const auto& api = comm.api<MH_CommApi>();
  MH_Group* world = nullptr;
  check(api.world(comm.get(), 0, &world));
  MH_Group* split = nullptr;
  check(api.split(world, 0, 0, &split));
  EXPECT_EQ(api.group_size(split), 1);
  std::vector<float> send{1, 2, 3}, recv(3);
  const MH_CollectiveArgs args{sizeof(args),
                               mh::conformance::f32_vector(send.data(), 3),
                               mh::conformance::f32_vector(recv.data(), 3),
                               MH_REDUCE_SUM,
                               0,
                               nullptr};
  MH_Request* request = nullptr;
  check(api.all_reduce_start(split, &args, &request));
  check(api.request_wait(request));
  api.request_destroy(request);
  api.group_destroy(split);
  EXPECT_EQ(recv, send);
}

// ------------------------------------------------------------------------
// Planners: the arguments of 2.0's args structs reach the 1.x calls
// ------------------------------------------------------------------------

TEST_F(Abi1Adapter, TensorPlanIsReadPerWeightNameTheGateBeingFc1) {
  Made t(component(MH_KIND_TENSOR_PARALLEL, "megatron_v1"), {"size=2"});
  const MH_ModelShape s = shape();
  const char* const weights[] = {"mlp.fc2", "embedding", "attention.qkv", "attention.proj", "mlp.gate", "mlp.fc1"};
  const MH_TensorPlanArgs args{sizeof(args), nullptr, &s, weights, 6};
  std::vector<int32_t> shard(6, 42);
  MH_TensorPlan plan{};
  plan.struct_size = sizeof(plan);
  plan.shard = shard.data();
  check(t.api<MH_TensorParallelApi>().plan(t.get(), &args, &plan));
  EXPECT_EQ(plan.size, 2);
  EXPECT_THAT(shard,
              ElementsAre(MH_SHARD_COLS, MH_SHARD_ROWS, MH_SHARD_ROWS, MH_SHARD_COLS, MH_SHARD_ROWS, MH_SHARD_ROWS));
  EXPECT_EQ(plan.exit_fwd, MH_COLL_ALL_REDUCE);
}

TEST_F(Abi1Adapter, TensorPlanOfAWeight1xNeverKnewIsRefusedNamingItAndTheRebuild) {
  Made t(component(MH_KIND_TENSOR_PARALLEL, "megatron_v1"), {"size=2"});
  const MH_ModelShape s = shape();
  const char* const weights[] = {"embedding", "moe.router"};
  const MH_TensorPlanArgs args{sizeof(args), nullptr, &s, weights, 2};
  std::vector<int32_t> shard(2);
  MH_TensorPlan plan{};
  plan.struct_size = sizeof(plan);
  plan.shard = shard.data();
  try {
    check(t.api<MH_TensorParallelApi>().plan(t.get(), &args, &plan));
    FAIL() << "planned a weight 1.x never knew";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), MH_INVALID_ARGUMENT);
    EXPECT_THAT(e.what(), HasSubstr("parallel.tensor 'megatron_v1' was built for plugin ABI 1.x"));
    EXPECT_THAT(e.what(), HasSubstr("not 'moe.router': rebuild the plugin for plugin ABI 2"));
  }
}

TEST_F(Abi1Adapter, PipelinePlanAndScheduleGetTheirArguments) {
  Made p(component(MH_KIND_PIPELINE_PARALLEL, "echo_v1"), {});
  const MH_ModelShape s = shape();
  const MH_PipelinePlanArgs args{sizeof(args), nullptr, &s, 3};
  MH_PipelinePlan plan{};
  plan.struct_size = sizeof(plan);
  check(p.api<MH_PipelineParallelApi>().plan(p.get(), &args, &plan));
  EXPECT_EQ(plan.size, 3);
  EXPECT_EQ(plan.virtual_stages, 7);  // layers
  EXPECT_EQ(plan.microbatches, 9);    // global_batch
  const MH_PipeAction* actions = nullptr;
  size_t count = 0;
  check(p.api<MH_PipelineParallelApi>().schedule(p.get(), 2, &actions, &count));
  EXPECT_EQ(count, 2u);
}

TEST_F(Abi1Adapter, DataContextAndExpertPlansGetTheirArguments) {
  Made d(component(MH_KIND_DATA_PARALLEL, "echo_v1"), {});
  const uint64_t bytes[] = {10, 20, 30};
  const MH_DataPlanArgs data_args{sizeof(data_args), nullptr, 4, bytes, 3};
  MH_DataPlan data{};
  data.struct_size = sizeof(data);
  check(d.api<MH_DataParallelApi>().plan(d.get(), &data_args, &data));
  EXPECT_EQ(data.size, 4);
  EXPECT_EQ(data.num_buckets, 3);
  EXPECT_EQ(data.distributed_optimizer, 30);  // the last parameter's bytes

  Made c(component(MH_KIND_CONTEXT_PARALLEL, "echo_v1"), {});
  const MH_ModelShape s = shape();
  const MH_ContextPlanArgs context_args{sizeof(context_args), nullptr, &s};
  MH_ContextPlan context{};
  context.struct_size = sizeof(context);
  check(c.api<MH_ContextParallelApi>().plan(c.get(), &context_args, &context));
  EXPECT_EQ(context.size, 4);           // heads
  EXPECT_EQ(context.comm, 7);           // layers
  EXPECT_EQ(context.load_balance, 64);  // hidden

  Made e(component(MH_KIND_EXPERT_PARALLEL, "echo_v1"), {});
  const MH_ExpertPlanArgs expert_args{sizeof(expert_args), nullptr, 8, 2};
  MH_ExpertPlan expert{};
  expert.struct_size = sizeof(expert);
  check(e.api<MH_ExpertParallelApi>().plan(e.get(), &expert_args, &expert));
  EXPECT_EQ(expert.size, 8);
  EXPECT_EQ(expert.experts_per_rank, 2);
}

// ------------------------------------------------------------------------
// Recompute and tuner: activations by name
// ------------------------------------------------------------------------

int32_t decision(const Made& policy, const char* activation) {
  const MH_RecomputeQuery q{sizeof(q), 0, 0, 2, activation, 1024};
  int32_t d = -1;
  check(policy.api<MH_RecomputeApi>().decide(policy.get(), &q, &d));
  return d;
}

TEST_F(Abi1Adapter, RecomputePolicyIsAskedByNameAndKeepsAnActivation1xNeverKnew) {
  Made legacy(component(MH_KIND_RECOMPUTE, "legacy"), {"keep=\"inputs\""});
  EXPECT_EQ(decision(legacy, "layer_input"), MH_KEEP);
  EXPECT_EQ(decision(legacy, "qkv"), MH_RECOMPUTE);
  EXPECT_EQ(decision(legacy, "mlp_out_mask"), MH_RECOMPUTE);
  EXPECT_EQ(decision(legacy, "moe.router_logits"), MH_KEEP);
}

// The echo tuner spells the keep table it received, 1.x's 13 columns a
// layer: 2.0's columns land at their 1.x index, a column 1.x never knew is
// dropped, and one the table does not list reads keep.
TEST_F(Abi1Adapter, TunerGetsTheKeepTableIn1xColumns) {
  Made t(component(MH_KIND_TUNER, "echo_v1"), {});
  const char* const activations[] = {"qkv", "layer_input", "moe.router"};
  const int32_t keep[] = {MH_RECOMPUTE, MH_KEEP, MH_RECOMPUTE, MH_KEEP, MH_RECOMPUTE, MH_RECOMPUTE};
  MH_Estimate e{};
  e.struct_size = sizeof(e);
  e.keep = keep;
  e.keep_layers = 2;
  e.activations = activations;
  e.num_activations = 3;
  const MH_Candidate candidate{};
  check(t.api<MH_TunerApi>().report(t.get(), &candidate, &e));
  const MH_TunerResult* rows = nullptr;
  size_t count = 0;
  check(t.api<MH_TunerApi>().results(t.get(), &rows, &count));
  ASSERT_EQ(count, 1u);
  EXPECT_STREQ(rows[0].reason,
               "KKRKKKKKKKKKK"
               "RKKKKKKKKKKKK");
}

TEST_F(Abi1Adapter, TunerOfAbi10HasOnlyNextAndReport) {
  const auto& t = *static_cast<const MH_TunerApi*>(component(MH_KIND_TUNER, "older").api);
  EXPECT_NE(t.next, nullptr);
  EXPECT_NE(t.report, nullptr);
  EXPECT_EQ(t.needs, nullptr);
  EXPECT_EQ(t.begin, nullptr);
  EXPECT_EQ(t.results, nullptr);
  EXPECT_EQ(t.recompute_policies, nullptr);
}

// ------------------------------------------------------------------------
// The host API a 1.x plugin gets
// ------------------------------------------------------------------------

TEST_F(Abi1Adapter, CompositionIsRefusedToA1xPluginSayingItNeedsARebuild) {
  const MH_ComponentDesc& c = component(MH_KIND_RECOMPUTE, "composer_v1");
  const mh::conformance::ComponentOptions options(c, {});
  const MH_CreateArgs args{sizeof(args), options.get(), 1, 0, nullptr, nullptr};
  MH_Instance* instance = nullptr;
  try {
    check(c.create(&args, &instance));
    FAIL() << "a 1.x plugin composed";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), MH_UNIMPLEMENTED);
    EXPECT_THAT(e.what(), HasSubstr("composition (find_component, create_component) needs a plugin rebuilt for "
                                    "plugin ABI 2"));
  }
}

}  // namespace
}  // namespace mh::host::testing
