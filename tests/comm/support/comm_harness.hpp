// Test harness for communicators: creates an instance through its
// MH_ComponentDesc as the host does (every declared option present, taken
// from its default unless the test overrides it) and calls it only through
// the MH_CommApi table, so the C trampolines run in every test.
#pragma once

#include <megahost/error.hpp>
#include <megahost/plugin.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <span>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace mh::comm::testing {

// Numeric option overrides: {"world_size", 4}, {"timeout_s", 0.5}.
using Overrides = std::vector<std::pair<std::string, double>>;

// The MH_Options create receives. Communicators declare numeric options only.
class OptionValues {
 public:
  OptionValues(const MH_ComponentDesc& desc, const Overrides& overrides) {
    for (size_t i = 0; i < desc.num_options; ++i) {
      const MH_OptionSpec& spec = desc.options[i];
      if (spec.type != MH_VALUE_INT && spec.type != MH_VALUE_DOUBLE)
        throw std::invalid_argument(std::string("non-numeric option ") + spec.name);
      values_.push_back(MH_NamedValue{spec.name, spec.type, 0, {}});
      set(values_.back(), std::stod(spec.default_value));
    }
    for (const auto& [name, value] : overrides) set(find(name), value);
    raw_ = MH_Options{MH_STRUCT_SIZE(MH_Options, section), values_.data(), values_.size(), "comm"};
  }
  OptionValues(const OptionValues&) = delete;
  OptionValues& operator=(const OptionValues&) = delete;

  const MH_Options* get() const { return &raw_; }

 private:
  static void set(MH_NamedValue& v, double value) {
    if (v.type == MH_VALUE_INT) v.value.i = static_cast<int64_t>(value);
    else v.value.d = value;
  }
  MH_NamedValue& find(const std::string& name) {
    for (MH_NamedValue& v : values_)
      if (name == v.name) return v;
    throw std::invalid_argument("test overrides undeclared option '" + name + "'");
  }

  std::vector<MH_NamedValue> values_;
  MH_Options raw_{};
};

// An instance created and destroyed through its descriptor.
class Comm {
 public:
  Comm(const MH_ComponentDesc& desc, const Overrides& overrides) : desc_(desc) {
    OptionValues options(desc, overrides);
    MH_CreateArgs args{sizeof(MH_CreateArgs), options.get(), 1, -1, nullptr, nullptr};
    check(desc.create(&args, &self_), std::string("create ") + desc.name);
  }
  ~Comm() { desc_.destroy(self_); }
  Comm(const Comm&) = delete;
  Comm& operator=(const Comm&) = delete;

  const MH_CommApi& api() const { return *static_cast<const MH_CommApi*>(desc_.api); }
  MH_Instance* self() const { return self_; }

  MH_CommInfo info() const {
    MH_CommInfo out{MH_STRUCT_SIZE(MH_CommInfo, first_rank), 0, 0, 0};
    check(api().info(self_, &out), "info");
    return out;
  }

  MH_Group* world(int32_t local) const {
    MH_Group* group = nullptr;
    check(api().world(self_, local, &group), "world");
    return group;
  }

 private:
  MH_ComponentDesc desc_;
  MH_Instance* self_ = nullptr;
};

// What a call returned: its code and message; frees the error.
struct Status {
  int32_t code = MH_OK;
  std::string message;

  explicit Status(MH_Error* raw) {
    ErrorPtr e(raw);
    if (e) {
      code = e->code;
      message = e->message;
    }
  }
  bool ok() const { return code == MH_OK; }
};

inline bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

template <class T>
constexpr int32_t dtype_of() {
  if constexpr (std::is_same_v<T, float>) return MH_F32;
  else if constexpr (std::is_same_v<T, int32_t>) return MH_I32;
  else if constexpr (std::is_same_v<T, int64_t>) return MH_I64;
  else if constexpr (std::is_same_v<T, uint16_t>) return MH_BF16;  // bf16 bits
  else return MH_U8;
}

// A 1-D view of `data`.
template <class T>
MH_Tensor tensor(std::span<const T> data, int32_t dtype = dtype_of<T>()) {
  MH_Tensor t{};
  t.data = const_cast<T*>(data.data());
  t.dtype = dtype;
  t.ndim = 1;
  t.shape[0] = static_cast<int64_t>(data.size());
  t.strides[0] = 1;
  return t;
}

template <class T>
MH_CollectiveArgs args(std::span<const T> send, std::span<T> recv, int32_t op = MH_REDUCE_SUM, int32_t peer = 0) {
  MH_CollectiveArgs a{};
  a.struct_size = MH_STRUCT_SIZE(MH_CollectiveArgs, stream);
  a.send = tensor(send);
  a.recv = tensor(std::span<const T>(recv));
  a.op = op;
  a.peer = peer;
  return a;
}

template <class T>
MH_CollectiveArgs send_args(std::span<const T> send, int32_t peer) {
  return args<T>(send, {}, MH_REDUCE_SUM, peer);
}

template <class T>
MH_CollectiveArgs recv_args(std::span<T> recv, int32_t peer) {
  return args<T>({}, recv, MH_REDUCE_SUM, peer);
}

// An all_to_all of `send` into `recv`, blocks of the given per-peer counts.
template <class T>
MH_AllToAllArgs all_to_all_args(std::span<const T> send, const std::vector<int64_t>& send_counts, std::span<T> recv,
                                const std::vector<int64_t>& recv_counts) {
  MH_AllToAllArgs a{};
  a.struct_size = MH_STRUCT_SIZE(MH_AllToAllArgs, stream);
  a.send = tensor(send);
  a.recv = tensor(std::span<const T>(recv));
  a.send_counts = send_counts.data();
  a.recv_counts = recv_counts.data();
  return a;
}

// Runs body(rank, world group) on one thread per local rank and joins them.
inline void run_ranks(const Comm& comm, const std::function<void(int32_t, MH_Group*)>& body) {
  const MH_CommInfo info = comm.info();
  std::vector<std::thread> threads;
  for (int32_t local = 0; local < info.ranks_in_process; ++local)
    threads.emplace_back([&, local] { body(info.first_rank + local, comm.world(local)); });
  for (std::thread& t : threads) t.join();
}

inline double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

}  // namespace mh::comm::testing
