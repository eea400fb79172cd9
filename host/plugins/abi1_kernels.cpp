// Kernels built for ABI 1.x behind a 2.0 MH_KernelsApi. The ops kept 1.8's
// order and args; only each MH_Tensor grew (its device), so one conversion,
// driven by where an args struct's tensors lie, serves every op. The stream
// moved from the table to MH_EXTENSION_STREAM; capabilities moved first, and
// are derived as a 1.8 host derived them for a table older than 1.5.
#include <array>
#include <cstddef>

#include "plugins/abi1_component.hpp"

namespace mh::abi1 {

// Each args struct's sizeof in 1.8.
template <>
constexpr size_t kV1Sizeof<MH_GemmArgs> = 264;
template <>
constexpr size_t kV1Sizeof<MH_LayerNormArgs> = 496;
template <>
constexpr size_t kV1Sizeof<MH_LayerNormBwdArgs> = 648;
template <>
constexpr size_t kV1Sizeof<MH_ElementwiseArgs> = 264;
template <>
constexpr size_t kV1Sizeof<MH_BiasArgs> = 248;
template <>
constexpr size_t kV1Sizeof<MH_SoftmaxArgs> = 416;
template <>
constexpr size_t kV1Sizeof<MH_DropoutArgs> = 368;
template <>
constexpr size_t kV1Sizeof<MH_EmbeddingArgs> = 264;
template <>
constexpr size_t kV1Sizeof<MH_XentArgs> = 440;
template <>
constexpr size_t kV1Sizeof<MH_AdamWArgs> = 360;
template <>
constexpr size_t kV1Sizeof<MH_SumSquaresArgs> = 168;
template <>
constexpr size_t kV1Sizeof<MH_RmsNormArgs> = 336;
template <>
constexpr size_t kV1Sizeof<MH_RmsNormBwdArgs> = 488;
template <>
constexpr size_t kV1Sizeof<MH_RopeArgs> = 264;
template <>
constexpr size_t kV1Sizeof<MH_SwigluArgs> = 328;
template <>
constexpr size_t kV1Sizeof<MH_StridedCopyArgs> = 168;
template <>
constexpr size_t kV1Sizeof<MH_AttentionArgs> = 896;

namespace {

// ------------------------------------------------------------------------
// Device memory: the same calls on the 1.x instance
// ------------------------------------------------------------------------

// 1.8's MH_DeviceInfo ends at `dry`: the 1.x plugin fills that much, and
// device_id stays 0 (1.x could not name a CUDA ordinal).
MH_Error* device_info(MH_Instance* self, MH_DeviceInfo* out) {
  MH_DeviceInfo theirs{};
  theirs.struct_size = MH_STRUCT_SIZE(MH_DeviceInfo, dry);
  if (MH_Error* error = v1<V1KernelsApi>(self).device_info(instance(self).inner, &theirs)) return error;
  const size_t size = out->struct_size;
  std::memcpy(out, &theirs, std::min(size, sizeof theirs));
  out->struct_size = size;
  return nullptr;
}
MH_Error* alloc(MH_Instance* self, uint64_t bytes, void** out) {
  return v1<V1KernelsApi>(self).alloc(instance(self).inner, bytes, out);
}
void release(MH_Instance* self, void* ptr) { v1<V1KernelsApi>(self).free(instance(self).inner, ptr); }
MH_Error* copy(MH_Instance* self, void* dst, const void* src, uint64_t bytes, int32_t kind) {
  return v1<V1KernelsApi>(self).copy(instance(self).inner, dst, src, bytes, kind);
}
MH_Error* synchronize(MH_Instance* self) { return v1<V1KernelsApi>(self).synchronize(instance(self).inner); }
void* stream(MH_Instance* self) { return v1<V1KernelsApi>(self).stream(instance(self).inner); }

// ------------------------------------------------------------------------
// Ops: the args converted, the 1.x op called
// ------------------------------------------------------------------------

// The device the instance's tensors must be on: its device_info's type,
// ordinal 0, as the engine places its views (engine/device.cpp).
Placement device_of(Instance& i) {
  if (!i.device) {
    MH_DeviceInfo info{};
    info.struct_size = sizeof(info);
    check(i.component->v1<V1KernelsApi>().device_info(i.inner, &info), i.component->name + ": device_info");
    i.device = Placement{info.device_type, 0};
  }
  return *i.device;
}

template <class Args, V1Op V1KernelsApi::*theirs>
MH_Error* op(MH_Instance* self, const Args* args) {
  Instance& i = instance(self);
  if (MH_Error* e = guard([&] {
        const Placement device = device_of(i);
        for_each_tensor(*args, [&](const char* name, const MH_Tensor& t) {
          require_on_device(i.component->name.c_str(), name, t, device, "this kernels component");
        });
      }))
    return e;
  const V1Args<Args> converted(args);
  return (i.component->v1<V1KernelsApi>().*theirs)(i.inner, converted.get());
}

template <class Entry>
struct ArgsOf;
template <class Args>
struct ArgsOf<MH_Error* (*MH_KernelsApi::*)(MH_Instance*, const Args*)> {
  using type = Args;
};

// 2.0's entry `ours` calls 1.x's `theirs` where the 1.x table has it; an op
// the 1.x table lacks stays absent (NULL).
template <auto ours, V1Op V1KernelsApi::*theirs>
void route(const V1KernelsApi& v1_api, MH_KernelsApi& table) {
  table.*ours = v1_api.*theirs != nullptr ? &op<typename ArgsOf<decltype(ours)>::type, theirs> : nullptr;
}

void route_ops(const V1KernelsApi& v, MH_KernelsApi& t) {
  route<&MH_KernelsApi::gemm, &V1KernelsApi::gemm>(v, t);
  route<&MH_KernelsApi::layernorm, &V1KernelsApi::layernorm>(v, t);
  route<&MH_KernelsApi::layernorm_bwd, &V1KernelsApi::layernorm_bwd>(v, t);
  route<&MH_KernelsApi::elementwise, &V1KernelsApi::elementwise>(v, t);
  route<&MH_KernelsApi::bias_add, &V1KernelsApi::bias_add>(v, t);
  route<&MH_KernelsApi::bias_bwd, &V1KernelsApi::bias_bwd>(v, t);
  route<&MH_KernelsApi::softmax, &V1KernelsApi::softmax>(v, t);
  route<&MH_KernelsApi::softmax_bwd, &V1KernelsApi::softmax_bwd>(v, t);
  route<&MH_KernelsApi::dropout, &V1KernelsApi::dropout>(v, t);
  route<&MH_KernelsApi::dropout_bwd, &V1KernelsApi::dropout_bwd>(v, t);
  route<&MH_KernelsApi::embedding, &V1KernelsApi::embedding>(v, t);
  route<&MH_KernelsApi::embedding_bwd, &V1KernelsApi::embedding_bwd>(v, t);
  route<&MH_KernelsApi::xent, &V1KernelsApi::xent>(v, t);
  route<&MH_KernelsApi::adamw, &V1KernelsApi::adamw>(v, t);
  route<&MH_KernelsApi::sum_squares, &V1KernelsApi::sum_squares>(v, t);
  route<&MH_KernelsApi::rmsnorm, &V1KernelsApi::rmsnorm>(v, t);
  route<&MH_KernelsApi::rmsnorm_bwd, &V1KernelsApi::rmsnorm_bwd>(v, t);
  route<&MH_KernelsApi::rope, &V1KernelsApi::rope>(v, t);
  route<&MH_KernelsApi::swiglu, &V1KernelsApi::swiglu>(v, t);
  route<&MH_KernelsApi::swiglu_bwd, &V1KernelsApi::swiglu_bwd>(v, t);
  route<&MH_KernelsApi::strided_copy, &V1KernelsApi::strided_copy>(v, t);
  route<&MH_KernelsApi::attention, &V1KernelsApi::attention>(v, t);
  route<&MH_KernelsApi::attention_bwd, &V1KernelsApi::attention_bwd>(v, t);
}

// A table of 1.5 on says its capabilities; for an older one a 1.8 host
// derived them: a table with strided_copy (1.4) takes non-square softmax
// scores. The bits kept their values in 2.0.
uint64_t capabilities(const V1KernelsApi& theirs) {
  if (theirs.struct_size >= MH_STRUCT_SIZE(V1KernelsApi, capabilities)) return theirs.capabilities;
  return theirs.strided_copy != nullptr ? uint64_t{MH_KERNELS_CAP_PARTIAL_SOFTMAX} : 0;
}

}  // namespace

void fill_kernels(Component& c) {
  const V1KernelsApi& theirs = c.v1<V1KernelsApi>();
  MH_KernelsApi t{};
  t.struct_size = sizeof(t);
  t.capabilities = capabilities(theirs);
  t.device_info = &device_info;
  t.alloc = &alloc;
  t.free = &release;
  t.copy = &copy;
  t.synchronize = &synchronize;
  route_ops(theirs, t);
  c.ours = t;
  // Every 1.x table has a stream (the entry was required).
  if (theirs.stream != nullptr)
    c.stream = MH_StreamExtension{{sizeof(MH_StreamExtension), MH_EXTENSION_STREAM, nullptr}, &stream};
}

}  // namespace mh::abi1
