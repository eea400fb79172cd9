// One component of a plugin built for ABI 1.x as the rest of the host sees
// it: a 2.0 MH_ComponentDesc whose table is the adapter's trampolines,
// each of which converts its 2.0 arguments and calls the 1.x table on the
// 1.x instance the adapter's instance wraps. Shared by the adapter's files
// (abi1_adapter.cpp reads the descriptor, one file per group of kinds fills
// the tables).
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>
#include <megahost/placement.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "plugins/abi1_types.hpp"
#include <megahost/args_tensors.hpp>

namespace mh::abi1 {

// The 2.0 table of a component, whichever its kind.
using Table = std::variant<MH_KernelsApi, MH_CommApi, MH_TensorParallelApi, MH_PipelineParallelApi, MH_DataParallelApi,
                           MH_RecomputeApi, MH_TunerApi, MH_ObserverApi, MH_ContextParallelApi, MH_ExpertParallelApi>;

struct Component {
  int32_t kind;
  std::string name;                                                   // for messages: "kernels 'naive_v1'"
  MH_Error* (*create)(const MH_CreateArgs* args, MH_Instance** out);  // the 1.x component's
  void (*destroy)(MH_Instance* self);                                 // the 1.x component's
  std::vector<uint64_t> theirs;  // the 1.x table; the entries past its struct_size read 0 (absent)
  Table ours;                    // the 2.0 table
  MH_StreamExtension stream{};   // kernels: the 1.x stream entry as an extension

  template <class V1Api>
  const V1Api& v1() const {
    return *reinterpret_cast<const V1Api*>(theirs.data());
  }
};

// A communicator's group or request: the 1.x one and its component.
struct Group {
  const Component* component;
  MH_Group* inner;
};
struct Request {
  const Component* component;
  MH_Request* inner;
};

// An instance of an adapted component: the 1.x instance and its component.
struct Instance {
  const Component* component;
  MH_Instance* inner;
  // kernels: the device its tensors must be on, from its device_info (a 1.x
  // component cannot refuse a tensor placed elsewhere: the adapter does).
  std::optional<Placement> device;
  // comm: the world groups, which the instance owns (MH_CommApi.world).
  std::mutex mutex;
  std::map<int32_t, std::unique_ptr<Group>> worlds;
};

inline Instance& instance(MH_Instance* self) { return *reinterpret_cast<Instance*>(self); }
inline Group& group(const MH_Group* g) { return *reinterpret_cast<Group*>(const_cast<MH_Group*>(g)); }
inline Request& request(MH_Request* r) { return *reinterpret_cast<Request*>(r); }

template <class V1Api>
const V1Api& v1(MH_Instance* self) {
  return instance(self).component->v1<V1Api>();
}

// 1.8's sizeof of an args struct that carries tensors, the golden value
// its converted layout is checked against: specialised beside the
// trampolines that convert it.
template <class Args>
constexpr size_t kV1Sizeof = 0;

template <class Args>
constexpr bool layout_is_1_8s() {
  constexpr auto& fields = ArgsTensors<Args>::fields;
  return std::is_sorted(fields.begin(), fields.end(),
                        [](const TensorField& a, const TensorField& b) { return a.offset < b.offset; }) &&
         sizeof(Args) - kTensorGrowth * fields.size() == kV1Sizeof<Args>;
}

// The 1.x form of a 2.0 args struct: the same bytes with each tensor cut to
// its 1.x prefix (the device dropped), struct_size counting the 1.x bytes.
// A tensor past the caller's struct_size (an optional one it left out)
// stays out.
template <class Args>
class V1Args {
 public:
  explicit V1Args(const Args* args) {
    static_assert(layout_is_1_8s<Args>(), "an args struct's tensors (args_tensors.hpp) or its 1.8 size are wrong");
    const auto* in = reinterpret_cast<const std::byte*>(args);
    const size_t size = std::min(args->struct_size, sizeof(Args));
    size_t from = 0, to = 0;
    for (const TensorField& field : ArgsTensors<Args>::fields) {
      const size_t at = field.offset;
      if (at + sizeof(V1Tensor) > size) break;
      std::memcpy(bytes_ + to, in + from, at + sizeof(V1Tensor) - from);
      to += at + sizeof(V1Tensor) - from;
      from = at + sizeof(MH_Tensor);
    }
    if (from < size) {
      std::memcpy(bytes_ + to, in + from, size - from);
      to += size - from;
    }
    std::memcpy(bytes_, &to, sizeof(size_t));
  }
  const void* get() const { return bytes_; }

 private:
  alignas(Args) std::byte bytes_[sizeof(Args)];
};

// A 2.0 entry `ours` where the 1.x table has `theirs` (within its
// struct_size and not NULL), else absent.
template <class Ours, class Theirs>
Ours if_present(Ours ours, Theirs theirs) {
  return theirs != nullptr ? ours : nullptr;
}

// The per-kind tables (abi1_kernels.cpp, abi1_comm.cpp, abi1_planners.cpp):
// each fills `c.ours` (and the kernels' stream extension) from `c.theirs`.
void fill_kernels(Component& c);
void fill_comm(Component& c);
void fill_planner(Component& c);

// The 1.x index of a 2.0 weight or activation name (abi1_names.cpp); -1
// when 1.x had none of that name.
int32_t weight_index(const char* name);
int32_t activation_index(const char* name);
// "embedding, attention.qkv, ...": the weight names 1.x can shard.
std::string known_weights();

}  // namespace mh::abi1
