// Helpers of the GPU tests: plugin modules loaded the way the host loads
// them (dlopen RTLD_NOW | RTLD_LOCAL, the one entry symbol), components
// created through their descriptors with their declared option defaults, and
// kernels instances driven through the C table only. Nothing here links
// CUDA: device memory comes from the cuda kernels' own alloc and copy.
#pragma once

#include <megahost/abi.h>
#include <megahost/dtype.hpp>
#include <megahost/error.hpp>
#include <megahost/placement.hpp>

#include <dlfcn.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace mh::gpu_test {

// Loads a module and calls its entry point; like the host, never unloads it.
inline const MH_PluginDesc& load_plugin(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw std::runtime_error(dlerror());
  auto entry = reinterpret_cast<MH_EntryFn>(dlsym(library, MH_ENTRY_SYMBOL));
  if (entry == nullptr) throw std::runtime_error(std::string(path) + " has no " + MH_ENTRY_SYMBOL);
  static const MH_HostApi host{sizeof(MH_HostApi), MH_ABI_MAJOR, MH_ABI_MINOR,
                               [](int32_t, const char*, const char*) {}, nullptr, nullptr, nullptr};
  const MH_PluginDesc* desc = nullptr;
  mh::check(entry(&host, &desc), path);
  return *desc;
}

// The plugin's only component.
inline const MH_ComponentDesc& only_component(const char* path) {
  const MH_PluginDesc& plugin = load_plugin(path);
  if (plugin.num_components != 1) throw std::runtime_error(std::string(path) + " has several components");
  return plugin.components[0];
}

// Option values as TOML literals by name, e.g. {{"dtype", "\"fp32\""}}.
using Overrides = std::map<std::string, std::string>;

// The MH_Options create receives: every declared option, from its default
// unless overridden.
class OptionValues {
 public:
  OptionValues(const MH_ComponentDesc& desc, const Overrides& overrides) {
    for (size_t i = 0; i < desc.num_options; ++i) {
      const MH_OptionSpec& spec = desc.options[i];
      auto it = overrides.find(spec.name);
      values_.push_back(parse(spec, it != overrides.end() ? it->second : spec.default_value));
    }
    raw_ = MH_Options{MH_STRUCT_SIZE(MH_Options, section), values_.data(), values_.size(), "test"};
  }
  const MH_Options* get() const { return &raw_; }

 private:
  MH_NamedValue parse(const MH_OptionSpec& spec, const std::string& literal) {
    MH_NamedValue v{};
    v.name = spec.name;
    v.type = spec.type;
    switch (spec.type) {
      case MH_VALUE_INT: v.value.i = std::stoll(literal); break;
      case MH_VALUE_DOUBLE: v.value.d = std::stod(literal); break;
      case MH_VALUE_BOOL: v.value.b = literal == "true"; break;
      default: v.value.s = strings_.emplace_back(literal.substr(1, literal.size() - 2)).c_str(); break;
    }
    return v;
  }

  std::vector<MH_NamedValue> values_;
  std::deque<std::string> strings_;
  MH_Options raw_{};
};

// What create gave: an instance, or the error.
struct Created {
  MH_Instance* self = nullptr;
  mh::ErrorPtr error;
};

inline Created create(const MH_ComponentDesc& desc, const Overrides& overrides, int32_t rank = 0) {
  OptionValues options(desc, overrides);
  const MH_CreateArgs args{sizeof(MH_CreateArgs), options.get(), 1, rank, nullptr, nullptr};
  Created out;
  out.error.reset(desc.create(&args, &out.self));
  return out;
}

template <class Args>
using Op = MH_Error* (*MH_KernelsApi::*)(MH_Instance*, const Args*);

// A kernels instance on device `where`, destroyed with the object.
class Kernels {
 public:
  Kernels(const MH_ComponentDesc& desc, MH_Instance* self, Placement where)
      : desc_(desc), self_(self), where_(where) {}
  ~Kernels() { desc_.destroy(self_); }
  Kernels(const Kernels&) = delete;
  Kernels& operator=(const Kernels&) = delete;

  const MH_KernelsApi& api() const { return *static_cast<const MH_KernelsApi*>(desc_.api); }
  MH_Instance* self() const { return self_; }
  const MH_ComponentDesc& desc() const { return desc_; }
  Placement placement() const { return where_; }
  // The stream its ops are enqueued on (MH_EXTENSION_STREAM), NULL without one.
  void* stream() const {
    const auto* ext = reinterpret_cast<const MH_StreamExtension*>(
        MH_FindExtension(desc_.extensions, MH_EXTENSION_STREAM));
    return ext != nullptr ? ext->stream(self_) : nullptr;
  }

  template <class Args>
  void run(Op<Args> op, const Args& args) const {
    mh::check((api().*op)(self_, &args));
  }
  template <class Args>
  mh::ErrorPtr fails(Op<Args> op, const Args& args) const {
    return mh::ErrorPtr((api().*op)(self_, &args));
  }

  MH_DeviceInfo device_info() const {
    MH_DeviceInfo info{};
    info.struct_size = sizeof(info);
    mh::check(api().device_info(self_, &info), "device_info");
    return info;
  }
  void* alloc(uint64_t bytes) const {
    void* ptr = nullptr;
    mh::check(api().alloc(self_, bytes, &ptr), "alloc");
    return ptr;
  }
  void free(void* ptr) const { api().free(self_, ptr); }
  void copy(void* dst, const void* src, uint64_t bytes, MH_CopyKind kind) const {
    mh::check(api().copy(self_, dst, src, bytes, kind), "copy");
  }
  void synchronize() const { mh::check(api().synchronize(self_), "synchronize"); }

 private:
  const MH_ComponentDesc& desc_;
  MH_Instance* self_;
  Placement where_;
};

// A cuda kernels instance, or why there is none: the tests that need a
// device skip with that reason.
struct CudaOrReason {
  std::unique_ptr<Kernels> kernels;
  std::string reason;
};

// Its device is the `device` option's, else device 0: the default picks the
// rank's modulo the device count, and only rank 0 goes without the option.
inline CudaOrReason open_cuda(const Overrides& overrides, int32_t rank = 0) {
  const MH_ComponentDesc& desc = only_component(MH_KERNELS_CUDA_MODULE);
  Created c = create(desc, overrides, rank);
  if (c.error && c.error->code == MH_UNAVAILABLE) return {nullptr, c.error->message};
  mh::check(c.error.release(), "create kernels cuda");
  const auto device = overrides.find("device");
  const Placement where{MH_DEVICE_CUDA, device != overrides.end() ? std::stoi(device->second) : 0};
  return {std::make_unique<Kernels>(desc, c.self, where), ""};
}

// bf16 as its top 16 bits, rounded to nearest even, as the device rounds.
inline uint16_t to_bf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if (std::isnan(value)) return static_cast<uint16_t>((bits >> 16) | 0x40);
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1u)) >> 16);
}
inline float from_bf16(uint16_t bits) { return std::bit_cast<float>(uint32_t{bits} << 16); }

// A contiguous row-major view of memory on `where` (host memory by default).
inline MH_Tensor view(void* data, int32_t dtype, const std::vector<int64_t>& shape, Placement where = {}) {
  MH_Tensor t = placed(MH_Tensor{}, where);
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = shape[size_t(i)];
    t.strides[i] = stride;
    stride *= shape[size_t(i)];
  }
  return t;
}

// Values of `dtype` (f32, bf16, i32 or u8) as host bytes, and back as floats.
inline std::vector<uint8_t> encode(const std::vector<float>& values, int32_t dtype) {
  std::vector<uint8_t> bytes(values.size() * dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case MH_BF16: {
        const uint16_t b = to_bf16(values[i]);
        std::memcpy(&bytes[i * 2], &b, 2);
        break;
      }
      case MH_I32: {
        const int32_t v = static_cast<int32_t>(values[i]);
        std::memcpy(&bytes[i * 4], &v, 4);
        break;
      }
      case MH_U8: bytes[i] = static_cast<uint8_t>(values[i]); break;
      default: std::memcpy(&bytes[i * 4], &values[i], 4); break;
    }
  }
  return bytes;
}

inline std::vector<float> decode(const std::vector<uint8_t>& bytes, int32_t dtype) {
  std::vector<float> values(bytes.size() / dtype_size(dtype));
  for (size_t i = 0; i < values.size(); ++i) {
    switch (dtype) {
      case MH_BF16: {
        uint16_t b = 0;
        std::memcpy(&b, &bytes[i * 2], 2);
        values[i] = from_bf16(b);
        break;
      }
      case MH_I32: {
        int32_t v = 0;
        std::memcpy(&v, &bytes[i * 4], 4);
        values[i] = static_cast<float>(v);
        break;
      }
      case MH_U8: values[i] = bytes[i]; break;
      default: std::memcpy(&values[i], &bytes[i * 4], 4); break;
    }
  }
  return values;
}

// Device memory of a kernels instance, freed with the object.
class DeviceBuffer {
 public:
  DeviceBuffer(const Kernels& kernels, uint64_t bytes)
      : kernels_(&kernels), data_(kernels.alloc(bytes)), bytes_(bytes) {}
  ~DeviceBuffer() { kernels_->free(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* data() const { return data_; }
  // A contiguous view of the buffer, placed on its kernels' device.
  MH_Tensor view(int32_t dtype, const std::vector<int64_t>& shape) const {
    return gpu_test::view(data_, dtype, shape, kernels_->placement());
  }
  void upload(const std::vector<uint8_t>& bytes) const {
    kernels_->copy(data_, bytes.data(), bytes.size(), MH_HOST_TO_DEVICE);
  }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> bytes(bytes_);
    kernels_->copy(bytes.data(), data_, bytes_, MH_DEVICE_TO_HOST);
    return bytes;
  }

 private:
  const Kernels* kernels_;
  void* data_;
  uint64_t bytes_;
};

}  // namespace mh::gpu_test
