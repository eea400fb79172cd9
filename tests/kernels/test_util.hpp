// Helpers of the kernels tests: a component instance driven through its C
// table exactly as the host drives it, tensor views, random data, closeness
// checks and finite differences.
#pragma once

#include "cpu_kernels.hpp"

#include <megahost/plugin.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace mh::kernels::test {

// Option values as TOML literals by name, e.g. {{"dtype", "\"bf16\""}}.
using Overrides = std::map<std::string, std::string>;

template <class Args>
using Op = MH_Error* (*MH_KernelsApi::*)(MH_Instance*, const Args*);

// An instance of component T created through its descriptor, with T's
// declared option defaults and `overrides` (TOML literals, as in a config).
template <class T>
class Instance {
 public:
  explicit Instance(const Overrides& overrides = {}, int32_t ranks_in_process = 1)
      : desc_(mh::component<T>("test", "0", "", T::options)) {
    std::vector<MH_NamedValue> values;
    for (const MH_OptionSpec& spec : T::options) {
      auto it = overrides.find(spec.name);
      values.push_back(parse(spec, it != overrides.end() ? it->second : spec.default_value));
    }
    const MH_Options options{MH_STRUCT_SIZE(MH_Options, section), values.data(), values.size(), "kernels"};
    const MH_CreateArgs args{sizeof(MH_CreateArgs), &options, ranks_in_process, 0, nullptr, nullptr};
    mh::check(desc_.create(&args, &self_), "create");
  }
  ~Instance() { desc_.destroy(self_); }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const MH_KernelsApi& api() const { return *static_cast<const MH_KernelsApi*>(desc_.api); }
  const MH_ComponentDesc& desc() const { return desc_; }
  MH_Instance* self() const { return self_; }

  // Runs an op; an error comes back as an mh::Error exception, which gtest
  // reports with its message.
  template <class Args>
  void run(Op<Args> op, const Args& args) const {
    mh::check((api().*op)(self_, &args));
  }

  // Runs an op that should fail; returns the error (null ptr if none).
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

  MH_ComponentDesc desc_;
  MH_Instance* self_ = nullptr;
  std::deque<std::string> strings_;  // string option values, alive while the instance is
};

// The cpu component with `threads` threads and a given peak, so that tests
// skip the peak measurement.
class Cpu : public Instance<CpuKernels> {
 public:
  explicit Cpu(int threads = 2) : Instance(Overrides{{"threads", std::to_string(threads)}, {"peak_gflops", "50"}}) {}
};

template <class T>
constexpr int32_t dtype_of() {
  if constexpr (std::is_same_v<T, float>) return MH_F32;
  else if constexpr (std::is_same_v<T, int32_t>) return MH_I32;
  else return MH_U8;
}

// A contiguous row-major view of `data` with `shape`.
inline MH_Tensor view(void* data, int32_t dtype, std::vector<int64_t> shape) {
  MH_Tensor t{};
  t.data = data;
  t.dtype = dtype;
  t.ndim = static_cast<int32_t>(shape.size());
  int64_t stride = 1;
  for (int32_t i = t.ndim - 1; i >= 0; --i) {
    t.shape[i] = shape[i];
    t.strides[i] = stride;
    stride *= shape[i];
  }
  return t;
}

template <class T>
MH_Tensor view(std::vector<T>& data, std::vector<int64_t> shape) {
  return view(data.data(), dtype_of<T>(), std::move(shape));
}

// `t` with its strides replaced: a view over padded or interleaved memory.
inline MH_Tensor with_strides(MH_Tensor t, std::vector<int64_t> strides) {
  for (size_t i = 0; i < strides.size(); ++i) t.strides[i] = strides[i];
  return t;
}

inline std::vector<float> random_floats(size_t n, uint32_t seed, float lo = -1.0f, float hi = 1.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

// |actual - expected| <= atol + rtol * |expected| everywhere; names the first misses.
inline ::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<double>& expected,
                                            double rtol, double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << "sizes differ: " << actual.size() << " vs " << expected.size();
  int misses = 0;
  ::testing::AssertionResult result = ::testing::AssertionFailure();
  for (size_t i = 0; i < actual.size(); ++i) {
    const double diff = std::abs(actual[i] - expected[i]);
    if (diff <= atol + rtol * std::abs(expected[i])) continue;
    if (++misses <= 5) result << "\n  [" << i << "] " << actual[i] << " vs expected " << expected[i];
  }
  if (misses == 0) return ::testing::AssertionSuccess();
  return result << "\n  " << misses << " of " << actual.size() << " elements differ";
}

inline ::testing::AssertionResult all_close(const std::vector<float>& actual, const std::vector<float>& expected,
                                            double rtol, double atol) {
  return all_close(actual, to_double(expected), rtol, atol);
}

// d loss / d x by central differences of a double-precision loss: accurate
// to ~1e-9, so what a check against it measures is the kernel's f32 error.
inline std::vector<double> numeric_gradient(std::vector<double> x,
                                            const std::function<double(const std::vector<double>&)>& loss,
                                            double h = 1e-6) {
  std::vector<double> grad(x.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + h;
    const double up = loss(x);
    x[i] = saved - h;
    const double down = loss(x);
    x[i] = saved;
    grad[i] = (up - down) / (2 * h);
  }
  return grad;
}

// Tolerance of an f32 gradient against a double finite difference.
inline constexpr double kGradRtol = 1e-3, kGradAtol = 1e-4;

}  // namespace mh::kernels::test
