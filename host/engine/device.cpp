#include "engine/device.hpp"

#include <algorithm>
#include <cstddef>
#include <string>

namespace mh {
MH_Tensor view(void* data, int32_t dtype, std::initializer_list<int64_t> shape) {
  MH_Tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  std::copy(shape.begin(), shape.end(), t.shape);
  int64_t stride = 1;
  for (int i = t.ndim - 1; i >= 0; --i) {
    t.strides[i] = stride;
    stride *= t.shape[i];
  }
  return t;
}

MH_Tensor view(void* data, int32_t dtype, std::initializer_list<int64_t> shape,
               std::initializer_list<int64_t> strides) {
  MH_Tensor t = view(data, dtype, shape);
  std::copy(strides.begin(), strides.end(), t.strides);
  return t;
}

namespace {

const MH_StreamExtension* stream_extension(const MH_ComponentDesc& desc) {
  if (!reaches(desc, &MH_ComponentDesc::extensions)) return nullptr;
  return reinterpret_cast<const MH_StreamExtension*>(MH_FindExtension(desc.extensions, MH_EXTENSION_STREAM));
}

}  // namespace

Device::Device(const Instance& kernels)
    : api_(kernels.api<MH_KernelsApi>()),
      stream_(stream_extension(*kernels.component().desc)),
      component_(kernels.component().desc->name),
      plugin_(kernels.component().plugin->desc),
      instance_(kernels.get()) {
  require(api_->struct_size >= MH_STRUCT_SIZE(MH_KernelsApi, sum_squares),
          kernels.label() + " has an incomplete kernels table", MH_INTERNAL);
  info_.struct_size = sizeof(info_);
  check(api_->device_info(instance_, &info_), kernels.label() + ": device_info");
}

void* Device::stream() const { return stream_ != nullptr ? stream_->stream(instance_) : nullptr; }

namespace {

// The SDK that added the table member ending at byte `end`, for a plugin
// built for 1.x (docs/sdk.md, "ABI history"): every member up to
// sum_squares was in 1.0 (the constructor requires them).
const char* minor_adding(size_t end) {
  if (end > MH_STRUCT_SIZE(MH_KernelsApi, strided_copy)) return "1.7";
  if (end > MH_STRUCT_SIZE(MH_KernelsApi, swiglu_bwd)) return "1.4";
  return end > MH_STRUCT_SIZE(MH_KernelsApi, sum_squares) ? "1.3" : "1.0";
}

}  // namespace

uint64_t kernels_capabilities(const MH_KernelsApi& table) { return table.capabilities; }

const char* kernels_entry_name(size_t end) {
  // The entries after capabilities, in table order.
  static const char* const names[] = {
      "device_info",   "alloc",       "free",          "copy",       "synchronize",  "gemm",        "layernorm",
      "layernorm_bwd", "elementwise", "bias_add",      "bias_bwd",   "softmax",      "softmax_bwd", "dropout",
      "dropout_bwd",   "embedding",   "embedding_bwd", "xent",       "adamw",        "sum_squares", "rmsnorm",
      "rmsnorm_bwd",   "rope",        "swiglu",        "swiglu_bwd", "strided_copy", "attention",   "attention_bwd",
  };
  constexpr size_t first = MH_STRUCT_SIZE(MH_KernelsApi, capabilities);
  static_assert(sizeof(names) / sizeof(names[0]) == (sizeof(MH_KernelsApi) - first) / sizeof(void*));
  const size_t index = (end - first) / sizeof(void*) - 1;
  return end > first && index < sizeof(names) / sizeof(names[0]) ? names[index] : "?";
}

uint64_t tensor_bytes(const MH_Tensor& t) {
  if (t.data == nullptr || t.ndim <= 0) return 0;
  uint64_t n = 1;
  for (int32_t i = 0; i < t.ndim && i < MH_MAX_DIMS; ++i) n *= uint64_t(std::max<int64_t>(t.shape[i], 0));
  return n * dtype_size(t.dtype);
}

void Device::require_fits(MemCategory category, uint64_t bytes) const {
  const uint64_t capacity = info_.memory_bytes, after = memory_.total_current() + bytes;
  if (capacity == 0 || info_.dry != 0 || after <= capacity) return;
  throw Error(MH_RESOURCE_EXHAUSTED,
              "allocating " + memory_text(bytes) + " of " + category_name(category) + " would bring this rank to " +
                  memory_text(after) + ", past the " + memory_text(capacity) + " its device has (" + info_.name +
                  "); see each rank's needs with --dry_run, then lower the batch, sequence or model or add ranks "
                  "(kernels.memory_gb sets a cpu rank's share)");
}

std::string missing_op_message(const std::string& component, const MH_PluginDesc& plugin, const char* name,
                               size_t end, const std::string& needed_by) {
  const std::string fix = plugin.abi_major == 1 ? std::string("rebuild the plugin against SDK ") + minor_adding(end) +
                                                      " or later"
                                                : "choose kernels that implement it (megahost --list_plugins)";
  return "kernels plugin \"" + component + "\" (ABI " + std::to_string(plugin.abi_major) + "." +
         std::to_string(plugin.abi_minor) + ") has no " + name +
         (needed_by.empty() ? "" : ", which " + needed_by + " needs") + "; " + fix;
}

void Device::throw_missing_op(const char* name, size_t end, const std::string& needed_by) const {
  throw Error(MH_INVALID_ARGUMENT, missing_op_message(component_, *plugin_, name, end, needed_by));
}

void* Device::alloc(MemCategory category, uint64_t bytes) {
  require_fits(category, bytes);
  void* ptr = nullptr;
  ScopedPluginCall call("alloc");
  ObservedCall observed(MH_EVENT_OP, "alloc", nullptr, bytes);
  check(api_->alloc(instance_, bytes, &ptr),
        std::string("allocating ") + std::to_string(bytes) + " bytes of " + category_name(category));
  memory_.on_alloc(category, bytes);
  return ptr;
}

void Device::free(MemCategory category, void* ptr, uint64_t bytes) {
  if (ptr == nullptr) return;
  ScopedPluginCall call("free");
  ObservedCall observed(MH_EVENT_OP, "free", nullptr, bytes);
  api_->free(instance_, ptr);
  memory_.on_free(category, bytes);
}

void Device::to_device(void* dst, const void* src, uint64_t bytes) {
  ScopedPluginCall call("copy to device");
  ObservedCall observed(MH_EVENT_OP, "copy", nullptr, bytes);
  check(api_->copy(instance_, dst, src, bytes, MH_HOST_TO_DEVICE), "copy to device");
}

void Device::to_host(void* dst, const void* src, uint64_t bytes) {
  ScopedPluginCall call("copy to host");
  ObservedCall observed(MH_EVENT_OP, "copy", nullptr, bytes);
  check(api_->copy(instance_, dst, src, bytes, MH_DEVICE_TO_HOST), "copy to host");
}

void Device::synchronize() {
  ScopedPluginCall call("synchronize");
  ObservedCall observed(MH_EVENT_OP, "synchronize", nullptr, 0);
  check(api_->synchronize(instance_), "synchronize");
}

Buffer::Buffer(Device& device, MemCategory category, int64_t elements, int32_t dtype)
    : device_(&device), category_(category), elements_(elements), dtype_(dtype) {
  data_ = device.alloc(category, bytes());
}

Buffer& Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    std::swap(device_, other.device_);
    std::swap(category_, other.category_);
    std::swap(data_, other.data_);
    std::swap(elements_, other.elements_);
    std::swap(dtype_, other.dtype_);
  }
  return *this;
}

void Buffer::release() {
  if (data_ != nullptr) device_->free(category_, data_, bytes());
  data_ = nullptr;
  elements_ = 0;
}

}  // namespace mh
