// Conformance checks a plugin author runs against their own kernels or comm
// component, through its C table as the host calls it (docs/sdk.md, "Testing
// a plugin"). megahost_add_conformance_test() in MegahostPlugin.cmake makes
// a ctest of them; each check returns what failed, empty when it conforms.
//
// They check the contract of abi.h on values whose results are exact in f32
// (small integers: every sum and product below 2^24 is represented), so any
// difference is a failure, and AdamW against its formula to 1e-6 relative
// (a handful of f32 operations, each within half an ulp, 6e-8). Kernels are
// checked on whatever device they drive, through alloc and copy; comm
// components on host memory (stream NULL), the ranks of one process each on
// its own thread. Both must refuse a tensor placed on another device than
// theirs (abi.h, MH_Tensor) with MH_INVALID_ARGUMENT.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>
#include <megahost/placement.hpp>
#include <megahost/struct_size.hpp>

#include <dlfcn.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace mh::conformance {

// A component's options with every default filled in and `overrides`
// ("name=value", TOML literals as in a config) applied.
class ComponentOptions {
 public:
  ComponentOptions(const MH_ComponentDesc& c, const std::vector<std::string>& overrides) {
    for (size_t i = 0; i < c.num_options; ++i) texts_.emplace_back(c.options[i].default_value ? c.options[i].default_value : "");
    for (const std::string& o : overrides) {
      const size_t eq = o.find('=');
      bool known = false;
      for (size_t i = 0; i < c.num_options && eq != std::string::npos; ++i)
        if (o.compare(0, eq, c.options[i].name) == 0 && std::strlen(c.options[i].name) == eq) {
          texts_[i] = o.substr(eq + 1);
          known = true;
        }
      require(known, "'" + o + "' sets no option of '" + c.name + "'");
    }
    for (size_t i = 0; i < c.num_options; ++i) values_.push_back(value(c.options[i], texts_[i]));
    raw_ = MH_Options{sizeof(MH_Options), values_.data(), values_.size(), c.name};
  }
  const MH_Options* get() const { return &raw_; }

 private:
  MH_NamedValue value(const MH_OptionSpec& spec, std::string& text) {
    MH_NamedValue v{};
    v.name = spec.name;
    v.type = spec.type;
    require(!text.empty(), std::string("option '") + spec.name + "' is required: give it as " + spec.name + "=...");
    switch (spec.type) {
      case MH_VALUE_BOOL: v.value.b = text == "true"; break;
      case MH_VALUE_INT: v.value.i = std::strtoll(text.c_str(), nullptr, 10); break;
      case MH_VALUE_DOUBLE: v.value.d = std::strtod(text.c_str(), nullptr); break;
      default:
        if (text.size() >= 2 && text.front() == '"' && text.back() == '"') text = text.substr(1, text.size() - 2);
        v.value.s = text.c_str();
    }
    return v;
  }

  std::vector<std::string> texts_;  // not resized after values_ point into it
  std::vector<MH_NamedValue> values_;
  MH_Options raw_{};
};

// Loads `file` as the host does (RTLD_NOW | RTLD_LOCAL, the entry point of
// this major, with a host that logs to stderr and composes nothing) and
// returns component `kind` `name` of it. The library stays loaded.
inline const MH_ComponentDesc& load_component(const std::string& file, MH_Kind kind, const std::string& name) {
  void* library = dlopen(file.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw Error(MH_NOT_FOUND, "cannot load " + file + ": " + dlerror());
  auto entry = reinterpret_cast<MH_EntryFn>(dlsym(library, MH_ENTRY_SYMBOL));
  require(entry != nullptr, file + " has no " MH_ENTRY_SYMBOL, MH_NOT_FOUND);
  static const MH_HostApi host{sizeof(MH_HostApi), MH_ABI_MAJOR, MH_ABI_MINOR,
                               [](int32_t, const char* plugin, const char* message) {
                                 std::fprintf(stderr, "[%s] %s\n", plugin ? plugin : "?", message ? message : "");
                               },
                               nullptr, nullptr, nullptr};
  const MH_PluginDesc* desc = nullptr;
  check(entry(&host, &desc), "the entry point of " + file);
  const size_t stride = desc->component_size;
  for (size_t i = 0; i < desc->num_components; ++i) {
    const auto& c = *reinterpret_cast<const MH_ComponentDesc*>(reinterpret_cast<const char*>(desc->components) + i * stride);
    if (c.kind == kind && name == c.name) return c;
  }
  throw Error(MH_NOT_FOUND, file + " has no component '" + name + "' of that kind");
}

// An instance of `c`, destroyed with this object.
class Created {
 public:
  Created(const MH_ComponentDesc& c, const MH_Options* options, int32_t ranks, int32_t rank) : c_(c) {
    MH_CreateArgs args{sizeof(MH_CreateArgs), options, ranks, rank, nullptr, nullptr};
    check(c.create(&args, &self_), std::string("creating '") + c.name + "'");
  }
  ~Created() { c_.destroy(self_); }
  Created(const Created&) = delete;
  Created& operator=(const Created&) = delete;
  MH_Instance* get() const { return self_; }

 private:
  const MH_ComponentDesc& c_;
  MH_Instance* self_ = nullptr;
};

// Runs each named check, collecting "name: what failed" for those that throw.
class Checks {
 public:
  void run(const std::string& name, const std::function<void()>& check) {
    try {
      check();
    } catch (const std::exception& e) {
      std::lock_guard lock(mu_);
      failures_.push_back(name + ": " + e.what());
    }
  }
  const std::vector<std::string>& failures() const { return failures_; }

 private:
  std::mutex mu_;
  std::vector<std::string> failures_;
};

// n floats at `data` on `where`.
inline MH_Tensor f32_vector(void* data, int64_t n, Placement where = {}) {
  MH_Tensor t = placed(MH_Tensor{}, where);
  t.data = data;
  t.dtype = MH_F32;
  t.ndim = 1;
  t.shape[0] = n;
  t.strides[0] = 1;
  return t;
}

// Another device than `own`, for the refusal checks.
inline Placement elsewhere(Placement own) {
  return own.device == MH_DEVICE_CPU ? Placement{MH_DEVICE_CUDA, 0} : Placement{MH_DEVICE_CPU, 0};
}

// Releases `e`, which must be an error of `code`.
inline void expect_error(MH_Error* e, MH_ErrorCode code, const std::string& what) {
  require(e != nullptr, what + " succeeded; it must fail with code " + std::to_string(code));
  const int32_t got = e->code;
  const std::string message = e->message != nullptr ? e->message : "";
  e->destroy(e);
  require(got == code, what + " failed with code " + std::to_string(got) + " (" + message + "), expected " +
                           std::to_string(code));
}

inline void expect_equal(const std::vector<float>& got, const std::vector<float>& want, const std::string& what) {
  for (size_t i = 0; i < want.size(); ++i)
    require(got[i] == want[i], what + ": element " + std::to_string(i) + " is " + std::to_string(got[i]) +
                                   ", expected " + std::to_string(want[i]));
}

// Where a kernels instance's memory lives: the device its device_info
// names (the first of its kind: an instance created for rank 0 drives it).
inline Placement kernels_placement(const MH_KernelsApi& k, MH_Instance* self) {
  MH_DeviceInfo info{};
  info.struct_size = sizeof(info);
  check(k.device_info(self, &info), "device_info");
  return {info.device_type, 0};
}

// Device memory of one kernels instance holding f32 values.
class DeviceFloats {
 public:
  DeviceFloats(const MH_KernelsApi& k, MH_Instance* self, const std::vector<float>& values)
      : k_(k), self_(self), n_(values.size()), where_(kernels_placement(k, self)) {
    check(k.alloc(self, n_ * sizeof(float), &data_), "alloc");
    require(reinterpret_cast<uintptr_t>(data_) % 256 == 0, "alloc returned memory not aligned to 256 bytes");
    check(k.copy(self, data_, values.data(), n_ * sizeof(float), MH_HOST_TO_DEVICE), "copy to device");
  }
  ~DeviceFloats() { k_.free(self_, data_); }
  DeviceFloats(const DeviceFloats&) = delete;
  DeviceFloats& operator=(const DeviceFloats&) = delete;
  MH_Tensor t() const { return f32_vector(data_, int64_t(n_), where_); }
  std::vector<float> read() const {
    std::vector<float> out(n_);
    check(k_.synchronize(self_), "synchronize");
    check(k_.copy(self_, out.data(), data_, n_ * sizeof(float), MH_DEVICE_TO_HOST), "copy to host");
    return out;
  }

 private:
  const MH_KernelsApi& k_;
  MH_Instance* self_;
  size_t n_;
  Placement where_;
  void* data_ = nullptr;
};

inline void check_elementwise(const MH_KernelsApi& k, MH_Instance* self) {
  DeviceFloats x(k, self, {1, 2, 3, 4, 5}), y(k, self, {10, 20, 30, 40, 50}), out(k, self, {0, 0, 0, 0, 0});
  MH_ElementwiseArgs a{sizeof(MH_ElementwiseArgs), MH_ADD, x.t(), y.t(), out.t(), 0};
  check(k.elementwise(self, &a), "elementwise ADD");
  expect_equal(out.read(), {11, 22, 33, 44, 55}, "elementwise ADD");
  a.op = MH_AXPY;
  a.alpha = 2;
  check(k.elementwise(self, &a), "elementwise AXPY");
  expect_equal(out.read(), {12, 24, 36, 48, 60}, "elementwise AXPY");
}

// elementwise with x placed on another device: refused (a dry component
// too, which checks what a computing one would).
inline void check_refuses_other_device(const MH_KernelsApi& k, MH_Instance* self) {
  DeviceFloats x(k, self, {1, 2}), y(k, self, {3, 4}), out(k, self, {7, 7});
  MH_ElementwiseArgs a{sizeof(MH_ElementwiseArgs), MH_ADD, x.t(), y.t(), out.t(), 0};
  a.x = placed(a.x, elsewhere(placement_of(a.out)));
  expect_error(k.elementwise(self, &a), MH_INVALID_ARGUMENT, "elementwise with x on another device");
}

inline void check_sum_squares(const MH_KernelsApi& k, MH_Instance* self) {
  DeviceFloats x(k, self, {1, 2, 3, 4, 5, 6, 7, 8}), out(k, self, {4});
  MH_SumSquaresArgs a{sizeof(MH_SumSquaresArgs), x.t(), out.t()};
  check(k.sum_squares(self, &a), "sum_squares");
  expect_equal(out.read(), {4 + 204}, "sum_squares accumulates into out");
}

inline void check_adamw(const MH_KernelsApi& k, MH_Instance* self) {
  const std::vector<float> p0{1, -2, 0.5f}, g{0.1f, -0.3f, 2}, m0{0.01f, 0, -0.2f}, v0{0.001f, 0.004f, 0};
  DeviceFloats p(k, self, p0), grad(k, self, g), m(k, self, m0), v(k, self, v0);
  const float lr = 1e-2f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f;
  const int64_t t = 3;
  MH_AdamWArgs a{sizeof(MH_AdamWArgs), p.t(), grad.t(), m.t(), v.t(), lr, b1, b2, eps, wd, t};
  check(k.adamw(self, &a), "adamw");
  const std::vector<float> got = p.read();
  for (size_t i = 0; i < p0.size(); ++i) {
    const double mi = b1 * m0[i] + (1 - b1) * g[i], vi = b2 * v0[i] + (1 - b2) * g[i] * g[i];
    const double want = p0[i] - lr * (mi / (1 - std::pow(b1, t)) / (std::sqrt(vi / (1 - std::pow(b2, t))) + eps) +
                                      wd * p0[i]);
    require(std::abs(got[i] - want) <= 1e-6 * std::abs(want),
            "adamw: element " + std::to_string(i) + " is " + std::to_string(got[i]) + ", the formula gives " +
                std::to_string(want));
  }
}

// gemm in f32 compute only: [2x3] @ [3x2]^T-free small integers, exact.
inline void check_gemm(const MH_KernelsApi& k, MH_Instance* self) {
  DeviceFloats a(k, self, {1, 2, 3, 4, 5, 6}), b(k, self, {1, 0, 2, 1, 0, 3}), c(k, self, {1, 1, 1, 1});
  const auto matrix = [](const DeviceFloats& d, int64_t rows, int64_t cols) {
    MH_Tensor t = d.t();
    t.ndim = 3;
    t.shape[0] = 1, t.shape[1] = rows, t.shape[2] = cols;
    t.strides[0] = rows * cols, t.strides[1] = cols, t.strides[2] = 1;
    return t;
  };
  MH_GemmArgs g{sizeof(MH_GemmArgs), matrix(a, 2, 3), matrix(b, 3, 2), matrix(c, 2, 2), 0, 0, 1, 1};
  check(k.gemm(self, &g), "gemm");
  // [[1,2,3],[4,5,6]] @ [[1,0],[2,1],[0,3]] = [[5,11],[14,23]], plus beta * C of ones.
  expect_equal(c.read(), {6, 12, 15, 24}, "gemm C = A B + C");
}

// Two floats as the one-element-per-dimension view attention takes: ndim
// dimensions of 1, then the pair.
inline MH_Tensor pair_view(const DeviceFloats& d, int32_t ndim) {
  MH_Tensor t = d.t();
  t.ndim = ndim;
  for (int32_t i = 0; i < ndim; ++i) t.shape[i] = i + 1 == ndim ? 2 : 1, t.strides[i] = i + 1 == ndim ? 1 : 2;
  return t;
}

// attention in f32 compute over one key, where every result is exact:
// the only probability is 1, so out = v, lse = scale q.k, the backward adds
// dout to dv and nothing to dq and dk (dS = P (dout.v - dout.out) = 0).
inline void check_attention(const MH_KernelsApi& k, MH_Instance* self) {
  DeviceFloats q(k, self, {1, 2}), key(k, self, {2, 0.5f}), v(k, self, {3, -1}), out(k, self, {9, 9}),
      lse(k, self, {9}), dout(k, self, {1, 4}), dq(k, self, {1, 1}), dk(k, self, {2, 2}), dv(k, self, {3, 3});
  MH_AttentionArgs a{};
  a.struct_size = sizeof(a);
  a.q = pair_view(q, 4), a.k = pair_view(key, 3), a.v = pair_view(v, 3), a.out = pair_view(out, 4), a.lse = lse.t();
  a.dout = pair_view(dout, 4), a.dq = pair_view(dq, 4), a.dk = pair_view(dk, 3), a.dv = pair_view(dv, 3);
  a.scale = 0.5f;
  check(k.attention(self, &a), "attention");
  expect_equal(out.read(), {3, -1}, "attention over one key gives its value");
  expect_equal(lse.read(), {1.5f}, "attention's lse over one key is scale q.k");
  check(k.attention_bwd(self, &a), "attention_bwd");
  expect_equal(dv.read(), {4, 7}, "attention_bwd accumulates dout into dv");
  expect_equal(dq.read(), {1, 1}, "attention_bwd over one key adds nothing to dq");
  expect_equal(dk.read(), {2, 2}, "attention_bwd over one key adds nothing to dk");
}

// MH_KERNELS_CAP_ATTENTION_ACCUMULATE: a second key block with the
// same score as the first merges into out and lse by equal weights.
inline void check_attention_accumulate(const MH_KernelsApi& k, MH_Instance* self) {
  DeviceFloats q(k, self, {1, 2}), key(k, self, {2, 0.5f}), v(k, self, {3, -1}), v2(k, self, {5, 1}),
      out(k, self, {9, 9}), lse(k, self, {9});
  MH_AttentionArgs a{};
  a.struct_size = sizeof(a);
  a.q = pair_view(q, 4), a.k = pair_view(key, 3), a.v = pair_view(v, 3), a.out = pair_view(out, 4), a.lse = lse.t();
  a.scale = 0.5f;
  check(k.attention(self, &a), "attention");
  a.v = pair_view(v2, 3);
  a.accumulate = 1;
  check(k.attention(self, &a), "attention with accumulate");
  expect_equal(out.read(), {4, 0}, "attention with accumulate averages two blocks of equal scores");
  require(std::fabs(lse.read()[0] - (1.5f + std::log(2.0f))) < 1e-5f,
          "attention with accumulate: lse over two equal blocks is the first's + log 2");
}

// The kernels component `c`: its table's required entries, its device, and
// ops whose results are exact.
inline std::vector<std::string> check_kernels(const MH_ComponentDesc& c, const MH_Options* options) {
  Checks checks;
  const auto& k = *static_cast<const MH_KernelsApi*>(c.api);
  checks.run("table", [&] {
    require(k.struct_size >= MH_STRUCT_SIZE(MH_KernelsApi, sum_squares), "the table ends before sum_squares");
    require((k.capabilities & ~uint64_t{MH_KERNELS_CAP_PARTIAL_SOFTMAX | MH_KERNELS_CAP_DOCUMENTS |
                                        MH_KERNELS_CAP_ATTENTION_ACCUMULATE}) == 0,
            "capabilities has unknown bits");
  });
  Created instance(c, options, 1, 0);
  MH_DeviceInfo info{};
  info.struct_size = sizeof(info);
  checks.run("device_info", [&] {
    check(k.device_info(instance.get(), &info), "device_info");
    require(info.name != nullptr && info.peak_flops > 0, "device_info gives no name or no peak_flops");
  });
  checks.run("refuses another device", [&] { check_refuses_other_device(k, instance.get()); });
  if (info.dry != 0) return checks.failures();  // a dry component computes nothing to compare
  checks.run("free", [&] { k.free(instance.get(), nullptr); });
  checks.run("elementwise", [&] { check_elementwise(k, instance.get()); });
  checks.run("sum_squares", [&] { check_sum_squares(k, instance.get()); });
  checks.run("adamw", [&] { check_adamw(k, instance.get()); });
  if (info.compute_dtype == MH_F32) checks.run("gemm", [&] { check_gemm(k, instance.get()); });
  if (info.compute_dtype == MH_F32 && reaches(k, &MH_KernelsApi::attention_bwd) && k.attention != nullptr &&
      k.attention_bwd != nullptr)
    checks.run("attention", [&] { check_attention(k, instance.get()); });
  if (info.compute_dtype == MH_F32 && (k.capabilities & MH_KERNELS_CAP_ATTENTION_ACCUMULATE) != 0)
    checks.run("attention accumulate", [&] { check_attention_accumulate(k, instance.get()); });
  return checks.failures();
}

// all_to_all with counts that differ per peer: rank r sends p + 1 copies of
// 100 r + p to rank p, so it receives r + 1 copies of 100 q + r from each q.
inline void check_rank_all_to_all(const MH_CommApi& api, MH_Group* world, int32_t world_size) {
  const int32_t rank = api.group_rank(world);
  std::vector<int64_t> send_counts, recv_counts(static_cast<size_t>(world_size), rank + 1);
  std::vector<float> send, want;
  for (int32_t p = 0; p < world_size; ++p) {
    send_counts.push_back(p + 1);
    send.insert(send.end(), static_cast<size_t>(p + 1), float(100 * rank + p));
    want.insert(want.end(), static_cast<size_t>(rank + 1), float(100 * p + rank));
  }
  std::vector<float> recv(want.size(), -1);
  const MH_AllToAllArgs a{sizeof(MH_AllToAllArgs),
                          f32_vector(send.data(), int64_t(send.size())),
                          f32_vector(recv.data(), int64_t(recv.size())),
                          send_counts.data(),
                          recv_counts.data(),
                          nullptr};
  check(api.all_to_all(world, &a), "all_to_all");
  expect_equal(recv, want, "all_to_all blocks in rank order");
}

// One local rank's collectives on its world group, each result exact.
inline void check_rank_collectives(const MH_CommApi& api, MH_Group* world, int32_t world_size) {
  const int32_t rank = api.group_rank(world);
  require(api.group_size(world) == world_size, "group_size of the world is not info's world_size");
  std::vector<float> send{float(rank + 1), float(2 * (rank + 1))}, recv(2);
  MH_CollectiveArgs a{sizeof(MH_CollectiveArgs), f32_vector(send.data(), 2), f32_vector(recv.data(), 2),
                      MH_REDUCE_SUM, 0, nullptr};
  check(api.all_reduce(world, &a), "all_reduce");
  const float total = float(world_size * (world_size + 1) / 2);
  expect_equal(recv, {total, 2 * total}, "all_reduce SUM");
  std::vector<float> one{float(rank)};
  std::vector<float> all(static_cast<size_t>(world_size));
  a.send = f32_vector(one.data(), 1);
  a.recv = f32_vector(all.data(), world_size);
  check(api.all_gather(world, &a), "all_gather");
  std::vector<float> ranks;
  for (int32_t r = 0; r < world_size; ++r) ranks.push_back(float(r));
  expect_equal(all, ranks, "all_gather in rank order");
  std::vector<float> b{float(rank == 0 ? 42 : -1)};
  a.send = a.recv = f32_vector(b.data(), 1);
  a.peer = 0;
  check(api.broadcast(world, &a), "broadcast");
  expect_equal(b, {42}, "broadcast from rank 0");
  check(api.barrier(world), "barrier");
  a.send = f32_vector(send.data(), 2, elsewhere(Placement{}));
  a.recv = f32_vector(recv.data(), 2);
  expect_error(api.all_reduce(world, &a), MH_INVALID_ARGUMENT, "all_reduce with send on another device");
  if (reaches(api, &MH_CommApi::all_to_all) && api.all_to_all != nullptr)
    check_rank_all_to_all(api, world, world_size);
}

// The comm component `c` with the ranks of one process (its options say
// how many: threads' world_size, say), each on its own thread.
inline std::vector<std::string> check_comm(const MH_ComponentDesc& c, const MH_Options* options) {
  Checks checks;
  const auto& api = *static_cast<const MH_CommApi*>(c.api);
  Created instance(c, options, 0, -1);
  MH_CommInfo info{};
  info.struct_size = sizeof(info);
  checks.run("info", [&] {
    check(api.info(instance.get(), &info), "info");
    require(info.ranks_in_process >= 1 && info.world_size >= info.ranks_in_process, "info's sizes disagree");
  });
  if (info.ranks_in_process < 1 || info.world_size != info.ranks_in_process) return checks.failures();
  std::vector<std::thread> ranks;
  for (int32_t local = 0; local < info.ranks_in_process; ++local)
    ranks.emplace_back([&, local] {
      checks.run("rank " + std::to_string(local), [&] {
        try {
          MH_Group* world = nullptr;
          check(api.world(instance.get(), local, &world), "world");
          check_rank_collectives(api, world, info.world_size);
        } catch (const std::exception& e) {
          api.abort(instance.get(), info.first_rank + local, e.what());  // the other ranks stop waiting
          throw;
        }
      });
    });
  for (auto& t : ranks) t.join();
  return checks.failures();
}

}  // namespace mh::conformance
