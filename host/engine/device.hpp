// The engine's handle on one rank's kernels instance: tracked allocations
// and thin, checked wrappers over the op table.
#pragma once

#include <megahost/abi.h>
#include <megahost/dtype.hpp>
#include <megahost/error.hpp>
#include <megahost/placement.hpp>
#include <megahost/struct_size.hpp>

#include <cstdint>
#include <initializer_list>
#include <string>
#include <type_traits>
#include <utility>

#include <megahost/args_tensors.hpp>
#include "plugins/assembly.hpp"
#include "engine/memory.hpp"
#include "plugins/observer.hpp"
#include "plugins/plugin_calls.hpp"

namespace mh {

// A contiguous view of `data` with `shape`, on no device in particular
// (MH_Tensor.device is the CPU's zero): the Device and Collectives that pass
// it to a plugin place it on theirs.
MH_Tensor view(void* data, int32_t dtype, std::initializer_list<int64_t> shape);
// A view with explicit element strides (innermost last).
MH_Tensor view(void* data, int32_t dtype, std::initializer_list<int64_t> shape,
               std::initializer_list<int64_t> strides);
inline MH_Tensor none() { return MH_Tensor{}; }

// Where a tensor starts in device memory and what it holds: activations are
// in the kernels' compute dtype, parameters and gradients always f32, so a
// float* converts to an f32 one.
struct TypedPtr {
  void* data = nullptr;
  int32_t dtype = MH_F32;

  TypedPtr() = default;
  TypedPtr(void* p, int32_t type) : data(p), dtype(type) {}
  TypedPtr(const float* p) : data(const_cast<float*>(p)) {}
  // The address `elements` elements further on.
  TypedPtr operator+(int64_t elements) const {
    return {static_cast<char*>(data) + elements * int64_t(dtype_size(dtype)), dtype};
  }
  MH_Tensor t(std::initializer_list<int64_t> shape) const { return view(data, dtype, shape); }
};

// Whether a table has entry `op`: inside its struct_size and not NULL, the
// one rule for optional entries.
template <class Table, class Op>
bool has_entry(const Table& table, Op Table::*op) {
  return reaches(table, op) && table.*op != nullptr;
}

// The kernels table's capabilities (MH_KernelsCapability bits).
uint64_t kernels_capabilities(const MH_KernelsApi& table);

// The MH_KernelsApi member whose bytes end at `end` ("gemm", "softmax_bwd"),
// the name an observer's events carry.
const char* kernels_entry_name(size_t end);

// Bytes of every tensor an op's arguments name (data not NULL).
uint64_t tensor_bytes(const MH_Tensor& t);
template <class Args>
uint64_t op_bytes(const Args& a) {
  uint64_t bytes = 0;
  for_each_tensor(a, [&](const char*, const MH_Tensor& t) { bytes += tensor_bytes(t); });
  return bytes;
}

// 'kernels plugin "cpu" (ABI 2.0) has no rmsnorm, which <needed_by> needs;
// choose ...' for a table of `plugin` that lacks the op ending at byte
// `end`; for a plugin built for 1.x, the SDK minor that added it.
std::string missing_op_message(const std::string& component, const MH_PluginDesc& plugin, const char* name,
                               size_t end, const std::string& needed_by);

class Device {
 public:
  explicit Device(const Instance& kernels);

  const MH_DeviceInfo& info() const { return info_; }
  const MH_KernelsApi& api() const { return *api_; }
  MH_Instance* instance() const { return instance_; }
  // The native stream the ops are enqueued on (MH_EXTENSION_STREAM), NULL
  // for a component that runs each op before returning.
  void* stream() const;
  // Where this rank's memory lives: every tensor the host hands the
  // instance is memory it allocated (MH_Tensor.device).
  Placement placement() const { return {info_.device_type, info_.device_id}; }
  MemoryTracker& memory() { return memory_; }
  // FLOPs of the GEMMs issued so far (2 m n k per matrix product): the
  // hardware FLOPs, recomputation included.
  double gemm_flops() const { return gemm_flops_; }
  void count_gemm_flops(double flops) { gemm_flops_ += flops; }

  void* alloc(MemCategory category, uint64_t bytes);
  void free(MemCategory category, void* ptr, uint64_t bytes);
  void to_device(void* dst, const void* src, uint64_t bytes);
  void to_host(void* dst, const void* src, uint64_t bytes);
  void synchronize();

  // Calls one op of the table with struct_size filled in; throws mh::Error
  // naming the op when it fails, or when the plugin's table lacks it.
  template <class Args>
  void run(MH_Error* (*const MH_KernelsApi::*op)(MH_Instance*, const Args*), Args args, const char* what) {
    require_op(op, what, "");
    args.struct_size = sizeof(Args);
    for_each_tensor(args, [&](const char*, MH_Tensor& t) { t = placed(t, placement()); });
    ScopedPluginCall call(what);
    ObservedCall observed(MH_EVENT_OP, kernels_entry_name(member_end(*api_, op)), nullptr, op_bytes(args));
    check((api_->*op)(instance_, &args), std::string("kernels op ") + what);
  }

  // Throws MH_INVALID_ARGUMENT (bad input: the run asks for what the plugin
  // cannot do) unless the kernels table has `op`, an op a plugin may leave
  // out (abi.h) or one built for 1.x may predate: 'kernels plugin "cpu"
  // (ABI 1.2) has no rmsnorm, which <needed_by> needs; rebuild ...'. needed_by names the
  // config key that asks for it, e.g. model.normalization = "rmsnorm"; empty
  // leaves that clause out.
  template <class Op>
  void require_op(Op MH_KernelsApi::*op, const char* name, const std::string& needed_by) const {
    if (!has_entry(*api_, op)) throw_missing_op(name, member_end(*api_, op), needed_by);
  }

 private:
  // Throws before an allocation would take this rank past its device's
  // memory_bytes, naming both: past it the OS kills a CPU run, or a GPU
  // allocation fails, with no word of why.
  void require_fits(MemCategory category, uint64_t bytes) const;
  [[noreturn]] void throw_missing_op(const char* name, size_t end, const std::string& needed_by) const;

  const MH_KernelsApi* api_;
  const MH_StreamExtension* stream_;  // NULL: the component has none
  std::string component_;  // the kernels component's name, for messages
  const MH_PluginDesc* plugin_;  // its plugin, for the ABI version it was built against
  MH_Instance* instance_;
  MH_DeviceInfo info_{};
  MemoryTracker memory_;
  double gemm_flops_ = 0;
};

// One tracked device allocation, freed when it goes out of scope.
class Buffer {
 public:
  Buffer() = default;
  Buffer(Device& device, MemCategory category, int64_t elements, int32_t dtype = MH_F32);
  Buffer(Buffer&& other) noexcept { *this = std::move(other); }
  Buffer& operator=(Buffer&& other) noexcept;
  ~Buffer() { release(); }

  void release();
  void* data() const { return data_; }
  float* f32() const { return static_cast<float*>(data_); }
  int64_t numel() const { return elements_; }
  int32_t dtype() const { return dtype_; }
  TypedPtr ptr() const { return {data_, dtype_}; }
  uint64_t bytes() const { return uint64_t(elements_) * dtype_size(dtype_); }
  explicit operator bool() const { return data_ != nullptr; }
  MH_Tensor t(std::initializer_list<int64_t> shape) const { return view(data_, dtype_, shape); }

 private:
  Device* device_ = nullptr;
  MemCategory category_ = MemCategory::kWorkspace;
  void* data_ = nullptr;
  int64_t elements_ = 0;
  int32_t dtype_ = MH_F32;
};

}  // namespace mh
