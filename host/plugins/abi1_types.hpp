// The structs of plugin ABI 1.8 that the 1.x adapter reads or fills, as the
// 1.8 SDK laid them out (its header, frozen, is tests/fixtures/sdk1). Only
// what differs from 2.0 is declared here: structs 2.0 kept byte for byte
// (MH_Error, MH_OptionSpec, MH_Options, MH_ModelShape, the
// pipeline, data, context and expert plans, MH_Candidate, the tuner's other
// structs, MH_Event) are 2.0's own, and MH_DeviceInfo is 2.0's up to `dry`
// (2.0 appended device_id), MH_ModelShape and MH_Candidate up to their 1.8
// ends (2.1 appended to both; a reader checks struct_size for those fields). The golden sizes and offsets below are
// 1.8's on LP64, so a slip here fails the build, not a run.
#pragma once

#include <megahost/abi.h>

#include <cstddef>
#include <cstdint>

namespace mh::abi1 {

// The entry point of major 1 and the minor this adapter speaks.
inline constexpr const char* kEntrySymbol = "mh_plugin_entry_v1";
inline constexpr uint32_t kMajor = 1, kMinor = 8;

// MH_Tensor before 2.0 appended its device: every tensor of an args struct
// is this much shorter in 1.x.
struct V1Tensor {
  void* data;
  int32_t dtype, ndim;
  int64_t shape[MH_MAX_DIMS];
  int64_t strides[MH_MAX_DIMS];
};
inline constexpr size_t kTensorGrowth = sizeof(MH_Tensor) - sizeof(V1Tensor);

struct V1ComponentDesc;
struct V1HostApi {
  size_t struct_size;
  uint32_t abi_major, abi_minor;
  void (*log)(int32_t level, const char* plugin, const char* message);
  MH_Error* (*find_component)(int32_t kind, const char* name, const V1ComponentDesc** out);
  MH_Error* (*create_component)(int32_t kind, const char* name, const void* args, const V1ComponentDesc** component,
                                MH_Instance** out);
};

// MH_CreateArgs of 1.8 is 2.0's without `extensions`: a 1.x create reads the
// 2.0 struct within its own struct_size.
struct V1ComponentDesc {
  size_t struct_size;
  int32_t kind;
  const char* name;
  const char* version;
  const char* description;
  const MH_OptionSpec* options;
  size_t num_options;
  MH_Error* (*create)(const MH_CreateArgs* args, MH_Instance** out);
  void (*destroy)(MH_Instance* self);
  const void* api;
};

struct V1PluginDesc {
  size_t struct_size;
  uint32_t abi_major, abi_minor;
  const char* name;
  const char* version;
  const V1ComponentDesc* components;
  size_t num_components;
  size_t component_size;  // 1.2
  size_t option_size;     // 1.2
};

using EntryFn = MH_Error* (*)(const V1HostApi* host, const V1PluginDesc** out);

// An op of a 1.x table: its args are the 2.0 struct with shorter tensors.
using V1Op = MH_Error* (*)(MH_Instance* self, const void* args);

struct V1KernelsApi {
  size_t struct_size;
  MH_Error* (*device_info)(MH_Instance* self, MH_DeviceInfo* out);
  MH_Error* (*alloc)(MH_Instance* self, uint64_t bytes, void** out);
  void (*free)(MH_Instance* self, void* ptr);
  MH_Error* (*copy)(MH_Instance* self, void* dst, const void* src, uint64_t bytes, int32_t kind);
  MH_Error* (*synchronize)(MH_Instance* self);
  void* (*stream)(MH_Instance* self);
  V1Op gemm, layernorm, layernorm_bwd, elementwise, bias_add, bias_bwd, softmax, softmax_bwd, dropout, dropout_bwd,
      embedding, embedding_bwd, xent, adamw, sum_squares;
  V1Op rmsnorm, rmsnorm_bwd, rope, swiglu, swiglu_bwd;  // 1.3
  V1Op strided_copy;                                    // 1.4
  uint64_t capabilities;                                // 1.5
  V1Op attention, attention_bwd;                        // 1.7
};

// MH_CommApi of 1.8: 2.0's entries in 2.0's order, whose collectives take
// args with the shorter tensors.
struct V1CommApi {
  size_t struct_size;
  MH_Error* (*info)(MH_Instance* self, MH_CommInfo* out);
  MH_Error* (*world)(MH_Instance* self, int32_t local, MH_Group** out);
  MH_Error* (*split)(MH_Group* group, int32_t color, int32_t key, MH_Group** out);
  void (*group_destroy)(MH_Group* group);
  int32_t (*group_rank)(const MH_Group* group);
  int32_t (*group_size)(const MH_Group* group);
  MH_Error* (*all_reduce)(MH_Group* group, const void* args);
  MH_Error* (*all_gather)(MH_Group* group, const void* args);
  MH_Error* (*reduce_scatter)(MH_Group* group, const void* args);
  MH_Error* (*broadcast)(MH_Group* group, const void* args);
  MH_Error* (*send)(MH_Group* group, const void* args);
  MH_Error* (*recv)(MH_Group* group, const void* args);
  MH_Error* (*barrier)(MH_Group* group);
  void (*abort)(MH_Instance* self, int32_t rank, const char* reason);
  MH_Error* (*all_reduce_start)(MH_Group* group, const void* args, MH_Request** out);      // 1.1
  MH_Error* (*reduce_scatter_start)(MH_Group* group, const void* args, MH_Request** out);  // 1.1
  MH_Error* (*request_wait)(MH_Request* request);                                          // 1.1
  void (*request_destroy)(MH_Request* request);                                            // 1.1
  MH_Error* (*all_gather_start)(MH_Group* group, const void* args, MH_Request** out);      // 1.4
  MH_Error* (*all_to_all)(MH_Group* group, const void* args);                              // 1.7
};

// 1.x named weights and activations by these enums; 2.0 by names, which
// abi1_names.cpp maps to them.
inline constexpr int32_t kWeights = 5;       // MH_W_COUNT
inline constexpr int32_t kActivations = 13;  // MH_ACT_COUNT

struct V1TensorPlan {
  size_t struct_size;
  int32_t size, sequence_parallel;
  int32_t shard[kWeights];
  int32_t enter_fwd, enter_bwd, exit_fwd, exit_bwd;
  int32_t reduce_norm_grads;
};

struct V1TensorParallelApi {
  size_t struct_size;
  MH_Error* (*plan)(MH_Instance* self, const MH_ModelShape* shape, V1TensorPlan* out);
};

struct V1PipelineParallelApi {
  size_t struct_size;
  MH_Error* (*plan)(MH_Instance* self, const MH_ModelShape* shape, int32_t data_parallel, MH_PipelinePlan* out);
  MH_Error* (*schedule)(MH_Instance* self, int32_t stage, const MH_PipeAction** actions, size_t* count);
};

struct V1DataParallelApi {
  size_t struct_size;
  MH_Error* (*plan)(MH_Instance* self, int32_t data_parallel, const uint64_t* param_bytes, size_t num_params,
                    MH_DataPlan* out);
};

struct V1ContextParallelApi {
  size_t struct_size;
  MH_Error* (*plan)(MH_Instance* self, const MH_ModelShape* shape, MH_ContextPlan* out);
};

struct V1ExpertParallelApi {
  size_t struct_size;
  MH_Error* (*plan)(MH_Instance* self, int64_t experts, int32_t data_parallel, MH_ExpertPlan* out);
};

struct V1RecomputeQuery {
  size_t struct_size;
  int32_t layer, stage_first_layer, stage_layers;
  int32_t activation;  // MH_Activation of 1.x
  uint64_t bytes;
};

struct V1RecomputeApi {
  size_t struct_size;
  MH_Error* (*decide)(MH_Instance* self, const V1RecomputeQuery* query, int32_t* decision);
};

// MH_Estimate of 1.8: 2.0's without the keep table's column names; keep[l *
// kActivations + a] for 1.x activation a.
struct V1Estimate {
  size_t struct_size;
  uint64_t memory_bytes;
  double step_seconds, mfu;
  int32_t fits, measured;
  uint64_t capacity_bytes;
  const char* failure;
  const int32_t* keep;
  int64_t keep_layers;
  double ttft_seconds, tpot_seconds;
};

struct V1TunerApi {
  size_t struct_size;
  MH_Error* (*next)(MH_Instance* self, const MH_ModelShape* shape, MH_Candidate* out, int32_t* done);
  MH_Error* (*report)(MH_Instance* self, const MH_Candidate* candidate, const V1Estimate* estimate);
  MH_Error* (*needs)(MH_Instance* self, MH_TunerNeeds* out);                                       // 1.1
  MH_Error* (*begin)(MH_Instance* self, const MH_ModelShape* shape, const MH_Hardware* hardware);  // 1.1
  MH_Error* (*results)(MH_Instance* self, const MH_TunerResult** rows, size_t* count);             // 1.1
  MH_Error* (*recompute_policies)(MH_Instance* self, const char* const* names, size_t count);      // 1.4
};

// MH_ObserverApi and MH_Event are the same in 1.8 and 2.0: an observer
// passes through unchanged.

// Golden layout of 1.8 (LP64), from its header.
static_assert(sizeof(V1Tensor) == 80 && kTensorGrowth == 8 && offsetof(MH_Tensor, device) == sizeof(V1Tensor));
static_assert(sizeof(V1HostApi) == 40 && sizeof(V1ComponentDesc) == 80 && sizeof(V1PluginDesc) == 64);
static_assert(sizeof(MH_OptionSpec) == 64 && offsetof(MH_CreateArgs, extensions) == 32);
static_assert(sizeof(V1KernelsApi) == 248 && offsetof(V1KernelsApi, stream) == 48 &&
              offsetof(V1KernelsApi, sum_squares) == 168 && offsetof(V1KernelsApi, strided_copy) == 216 &&
              offsetof(V1KernelsApi, capabilities) == 224 && offsetof(V1KernelsApi, attention_bwd) == 240);
static_assert(sizeof(V1CommApi) == 168 && offsetof(V1CommApi, abort) == 112 && offsetof(V1CommApi, all_to_all) == 160);
static_assert(sizeof(V1TensorPlan) == 56 && offsetof(V1TensorPlan, shard) == 16 &&
              offsetof(V1TensorPlan, enter_fwd) == 36 && offsetof(V1TensorPlan, reduce_norm_grads) == 52);
static_assert(sizeof(V1RecomputeQuery) == 32 && offsetof(V1RecomputeQuery, activation) == 20 &&
              offsetof(V1RecomputeQuery, bytes) == 24);
static_assert(sizeof(V1Estimate) == 88 && offsetof(V1Estimate, keep) == 56 && offsetof(V1Estimate, keep_layers) == 64 &&
              offsetof(V1Estimate, tpot_seconds) == 80);
static_assert(sizeof(V1TunerApi) == 56 && offsetof(V1TunerApi, report) == 16 &&
              offsetof(V1TunerApi, recompute_policies) == 48);
// The structs 2.0 kept: still 1.8's sizes.
static_assert(sizeof(MH_PipelinePlan) == 40 && sizeof(MH_DataPlan) == 40 && sizeof(MH_ContextPlan) == 24 &&
              sizeof(MH_ExpertPlan) == 24 && MH_STRUCT_SIZE(MH_ModelShape, head_dim) == 112 &&
              offsetof(MH_Candidate, context_comm) == 64 &&
              MH_STRUCT_SIZE(MH_DeviceInfo, dry) == 48 && sizeof(MH_Event) == 56 && sizeof(MH_TunerResult) == 128 &&
              sizeof(MH_TunerNeeds) == 48 && sizeof(MH_Hardware) == 104 && sizeof(MH_CommInfo) == 24);
static_assert(offsetof(MH_Estimate, tpot_seconds) == offsetof(V1Estimate, tpot_seconds));

}  // namespace mh::abi1
