// Header-only helpers for plugin authors: write a class per component and
// register it with one macro. The class never sees a C function pointer and
// never lets an exception out: every table entry below is a trampoline that
// casts the instance back to the class and runs the method under mh::guard.
//
//   class MyPolicy {
//    public:
//     static constexpr MH_Kind kind = MH_KIND_RECOMPUTE;
//     explicit MyPolicy(const mh::CreateContext& ctx);
//     MH_Decision decide(const MH_RecomputeQuery& q);
//   };
//   MH_PLUGIN("my_policies", "1.0.0",
//             mh::component<MyPolicy>("mlp_only", "1.0.0", "keep only MLP activations"))
//
// The method set each kind needs is listed next to its table below.
//
// A plugin targets one ABI minor: MH_PLUGIN_MINOR, defined before this
// header is included, else this SDK's MH_ABI_MINOR. Every table is built to
// that minor's length and the descriptor says that minor; an entry the
// minor makes optional (the non-blocking collectives, the tuner's later
// calls) is NULL when the class lacks its method, while a kernels class
// that lacks an op its minor requires fails to compile, naming the op.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>
#include <megahost/options.hpp>
#include <megahost/struct_size.hpp>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <utility>

#ifndef MH_PLUGIN_MINOR
#define MH_PLUGIN_MINOR MH_ABI_MINOR
#endif
static_assert(MH_PLUGIN_MINOR >= 0 && MH_PLUGIN_MINOR <= MH_ABI_MINOR,
              "MH_PLUGIN_MINOR names a minor this SDK does not know (0 .. MH_ABI_MINOR)");

namespace mh {

// Internal linkage: each translation unit says the minor it targets.
constexpr uint32_t kPluginMinor = MH_PLUGIN_MINOR;

struct CreateContext {
  Options options;
  int32_t ranks_in_process;
  int32_t rank;
  // ABI 1.5: the options of the component this one wraps (its
  // MH_OPTION_INNER option names it); NULL otherwise. Borrowed for create.
  const MH_Options* inner_options = nullptr;
};

namespace detail {
inline const MH_HostApi* host_api = nullptr;
inline const char* plugin_name = "?";

template <class T>
T* as(MH_Instance* self) {
  return reinterpret_cast<T*>(self);
}

// Fills a full local copy of an output struct, then copies out only the
// bytes the caller declared in its struct_size, so an older caller with a
// smaller struct is never written past its end.
template <class Out, class F>
void fill_out(Out* out, F&& f) {
  require(out != nullptr, "output struct is NULL", MH_INVALID_ARGUMENT);
  Out local{};
  local.struct_size = sizeof(Out);
  f(local);
  size_t n = std::min<size_t>(out->struct_size == 0 ? sizeof(Out) : out->struct_size, sizeof(Out));
  local.struct_size = n;
  std::memcpy(out, &local, n);
}
}  // namespace detail

// Logs through the host (thread-safe); a no-op before the entry point ran.
inline void log(MH_LogLevel level, const std::string& message) {
  if (detail::host_api != nullptr && detail::host_api->log != nullptr)
    detail::host_api->log(level, detail::plugin_name, message.c_str());
}

// An instance of another component, created through the host's registry
// (MH_HostApi::create_component, ABI 1.5) and destroyed with this object:
// what a wrapper holds of the component it wraps. Api is the kind's table
// (MH_KernelsApi, MH_CommApi, ...), read in the host's layout, so a member
// past the inner plugin's struct_size reads NULL.
template <class Api>
class InnerComponent {
 public:
  // `options`: the values to forward (CreateContext::inner_options), checked
  // by the host against the component's specs, defaults filled in.
  InnerComponent(MH_Kind kind, const std::string& name, const CreateContext& ctx, const MH_Options* options) {
    const MH_HostApi* host = detail::host_api;
    require(host != nullptr && reaches(*host, &MH_HostApi::create_component) && host->create_component != nullptr,
            "wrapping '" + name + "' needs a host of plugin ABI 1.5 or later (MH_HostApi::create_component)",
            MH_UNIMPLEMENTED);
    MH_CreateArgs args{};
    args.struct_size = sizeof(args);
    args.options = options;
    args.ranks_in_process = ctx.ranks_in_process;
    args.rank = ctx.rank;
    check(host->create_component(kind, name.c_str(), &args, &desc_, &instance_), "creating '" + name + "'");
    name_ = name;
  }
  ~InnerComponent() {
    if (desc_ != nullptr) desc_->destroy(instance_);
  }
  InnerComponent(const InnerComponent&) = delete;
  InnerComponent& operator=(const InnerComponent&) = delete;

  const Api& api() const { return *static_cast<const Api*>(desc_->api); }
  MH_Instance* get() const { return instance_; }
  const std::string& name() const { return name_; }
  const MH_ComponentDesc& desc() const { return *desc_; }

 private:
  const MH_ComponentDesc* desc_ = nullptr;
  MH_Instance* instance_ = nullptr;
  std::string name_;
};

#define MH_TRAMPOLINE(T, method, Args)                                                 \
  [](MH_Instance* self, const Args* args) -> MH_Error* {                             \
    return ::mh::guard([&] { ::mh::detail::as<T>(self)->method(*args); });           \
  }

// Kernels: device_info(MH_DeviceInfo&), void* alloc(uint64_t), free(void*)
// noexcept, copy(dst, src, bytes, MH_CopyKind), synchronize(), void* stream(),
// and one method per op taking its args struct by const reference. A class
// targeting ABI 1.3 or later has the ops of 1.3 (rmsnorm, rmsnorm_bwd, rope,
// swiglu, swiglu_bwd), 1.4 or later also strided_copy, 1.5 or later
// declares `static constexpr uint64_t capabilities` (MH_KernelsCapability
// bits, 0 for none), and 1.7 or later has attention and attention_bwd: each
// is a static_assert, so a misspelt op is an error, not an older table.
template <class T>
const MH_KernelsApi* kernels_api() {
  static constexpr bool has_1_3 = requires(T& t, const MH_RmsNormArgs& n, const MH_RmsNormBwdArgs& nb,
                                           const MH_RopeArgs& r, const MH_SwigluArgs& s) {
    t.rmsnorm(n);
    t.rmsnorm_bwd(nb);
    t.rope(r);
    t.swiglu(s);
    t.swiglu_bwd(s);
  };
  static constexpr bool has_1_4 = requires(T& t, const MH_StridedCopyArgs& c) { t.strided_copy(c); };
  static constexpr bool has_caps = requires { uint64_t{T::capabilities}; };
  static constexpr bool has_1_7 = requires(T& t, const MH_AttentionArgs& a) {
    t.attention(a);
    t.attention_bwd(a);
  };
  static_assert(kPluginMinor < 3 || has_1_3,
                "a kernels class targeting ABI 1.3 or later needs rmsnorm, rmsnorm_bwd, rope, swiglu and swiglu_bwd "
                "(or #define MH_PLUGIN_MINOR 2 before including megahost/plugin.hpp)");
  static_assert(kPluginMinor < 4 || has_1_4, "a kernels class targeting ABI 1.4 or later needs strided_copy");
  static_assert(kPluginMinor < 5 || has_caps,
                "a kernels class targeting ABI 1.5 or later declares static constexpr uint64_t capabilities "
                "(MH_KernelsCapability bits, 0 for none)");
  static_assert(kPluginMinor < 7 || has_1_7, "a kernels class targeting ABI 1.7 or later needs attention and attention_bwd");
  static const MH_KernelsApi api = [] {
    MH_KernelsApi a{
      kPluginMinor >= 7   ? sizeof(MH_KernelsApi)
      : kPluginMinor >= 5 ? MH_STRUCT_SIZE(MH_KernelsApi, capabilities)
      : kPluginMinor == 4 ? MH_STRUCT_SIZE(MH_KernelsApi, strided_copy)
      : kPluginMinor == 3 ? MH_STRUCT_SIZE(MH_KernelsApi, swiglu_bwd)
                          : MH_STRUCT_SIZE(MH_KernelsApi, sum_squares),
      [](MH_Instance* self, MH_DeviceInfo* out) -> MH_Error* {
        return guard([&] { detail::fill_out(out, [&](MH_DeviceInfo& i) { detail::as<T>(self)->device_info(i); }); });
      },
      [](MH_Instance* self, uint64_t bytes, void** out) -> MH_Error* {
        return guard([&] { *out = detail::as<T>(self)->alloc(bytes); });
      },
      [](MH_Instance* self, void* ptr) { detail::as<T>(self)->free(ptr); },
      [](MH_Instance* self, void* dst, const void* src, uint64_t bytes, int32_t kind) -> MH_Error* {
        return guard([&] { detail::as<T>(self)->copy(dst, src, bytes, static_cast<MH_CopyKind>(kind)); });
      },
      [](MH_Instance* self) -> MH_Error* { return guard([&] { detail::as<T>(self)->synchronize(); }); },
      [](MH_Instance* self) -> void* { return detail::as<T>(self)->stream(); },
      MH_TRAMPOLINE(T, gemm, MH_GemmArgs),
      MH_TRAMPOLINE(T, layernorm, MH_LayerNormArgs),
      MH_TRAMPOLINE(T, layernorm_bwd, MH_LayerNormBwdArgs),
      MH_TRAMPOLINE(T, elementwise, MH_ElementwiseArgs),
      MH_TRAMPOLINE(T, bias_add, MH_BiasArgs),
      MH_TRAMPOLINE(T, bias_bwd, MH_BiasArgs),
      MH_TRAMPOLINE(T, softmax, MH_SoftmaxArgs),
      MH_TRAMPOLINE(T, softmax_bwd, MH_SoftmaxArgs),
      MH_TRAMPOLINE(T, dropout, MH_DropoutArgs),
      MH_TRAMPOLINE(T, dropout_bwd, MH_DropoutArgs),
      MH_TRAMPOLINE(T, embedding, MH_EmbeddingArgs),
      MH_TRAMPOLINE(T, embedding_bwd, MH_EmbeddingArgs),
      MH_TRAMPOLINE(T, xent, MH_XentArgs),
      MH_TRAMPOLINE(T, adamw, MH_AdamWArgs),
      MH_TRAMPOLINE(T, sum_squares, MH_SumSquaresArgs),
      nullptr, nullptr, nullptr, nullptr, nullptr,  // the 1.3 ops, filled below when the target has them
      nullptr,                                      // the 1.4 op, likewise
      0,                                            // the 1.5 capabilities, likewise
      nullptr, nullptr,                             // the 1.7 ops, likewise
    };
    if constexpr (kPluginMinor >= 3) {
      a.rmsnorm = MH_TRAMPOLINE(T, rmsnorm, MH_RmsNormArgs);
      a.rmsnorm_bwd = MH_TRAMPOLINE(T, rmsnorm_bwd, MH_RmsNormBwdArgs);
      a.rope = MH_TRAMPOLINE(T, rope, MH_RopeArgs);
      a.swiglu = MH_TRAMPOLINE(T, swiglu, MH_SwigluArgs);
      a.swiglu_bwd = MH_TRAMPOLINE(T, swiglu_bwd, MH_SwigluArgs);
    }
    if constexpr (kPluginMinor >= 4) a.strided_copy = MH_TRAMPOLINE(T, strided_copy, MH_StridedCopyArgs);
    if constexpr (kPluginMinor >= 5) a.capabilities = T::capabilities;
    if constexpr (kPluginMinor >= 7) {
      a.attention = MH_TRAMPOLINE(T, attention, MH_AttentionArgs);
      a.attention_bwd = MH_TRAMPOLINE(T, attention_bwd, MH_AttentionArgs);
    }
    return a;
  }();
  return &api;
}

#define MH_GROUP_TRAMPOLINE(G, method)                                                 \
  [](MH_Group* group, const MH_CollectiveArgs* args) -> MH_Error* {                  \
    return ::mh::guard([&] { reinterpret_cast<G*>(group)->method(*args); });         \
  }

#define MH_GROUP_START_TRAMPOLINE(G, method)                                                       \
  [](MH_Group* group, const MH_CollectiveArgs* args, MH_Request** out) -> MH_Error* {            \
    return ::mh::guard([&] {                                                                     \
      *out = reinterpret_cast<MH_Request*>(reinterpret_cast<G*>(group)->method(*args).release()); \
    });                                                                                          \
  }

// Communicators: info(MH_CommInfo&), Group* world(int32_t local),
// abort(int32_t rank, const char* reason) noexcept; and a nested class Group
// with Group* split(color, key), rank(), size(), all_reduce, all_gather,
// reduce_scatter, broadcast, send, recv (each taking MH_CollectiveArgs) and
// barrier(). Groups from split are deleted by group_destroy; world groups
// belong to the instance. Since ABI 1.1 a Group may also offer
// std::unique_ptr<Request> all_reduce_start(args) and reduce_scatter_start(args),
// with a nested class Group::Request that has wait() and whose destructor
// waits for a request still in flight; without them those entries are NULL
// (the host then reduces with the blocking calls). Since ABI 1.4 also
// all_gather_start(args), returning the same Request. Since ABI 1.7 also
// all_to_all(const MH_AllToAllArgs&).
template <class T>
const MH_CommApi* comm_api() {
  using G = typename T::Group;
  static constexpr bool v1_1 = requires(G& g, const MH_CollectiveArgs& a) { g.all_reduce_start(a).release(); };
  static constexpr bool v1_4 = requires(G& g, const MH_CollectiveArgs& a) { g.all_gather_start(a).release(); };
  static constexpr bool v1_7 = requires(G& g, const MH_AllToAllArgs& a) { g.all_to_all(a); };
  static_assert(v1_1 || !v1_4, "all_gather_start needs the 1.1 requests (all_reduce_start, Group::Request)");
  static const MH_CommApi api = [] {
    MH_CommApi a{
      kPluginMinor >= 7   ? MH_STRUCT_SIZE(MH_CommApi, all_to_all)
      : kPluginMinor >= 4 ? MH_STRUCT_SIZE(MH_CommApi, all_gather_start)
      : kPluginMinor >= 1 ? MH_STRUCT_SIZE(MH_CommApi, request_destroy)
                          : MH_STRUCT_SIZE(MH_CommApi, abort),
      [](MH_Instance* self, MH_CommInfo* out) -> MH_Error* {
        return guard([&] { detail::fill_out(out, [&](MH_CommInfo& i) { detail::as<T>(self)->info(i); }); });
      },
      [](MH_Instance* self, int32_t local, MH_Group** out) -> MH_Error* {
        return guard([&] { *out = reinterpret_cast<MH_Group*>(detail::as<T>(self)->world(local)); });
      },
      [](MH_Group* group, int32_t color, int32_t key, MH_Group** out) -> MH_Error* {
        return guard([&] { *out = reinterpret_cast<MH_Group*>(reinterpret_cast<G*>(group)->split(color, key)); });
      },
      [](MH_Group* group) { delete reinterpret_cast<G*>(group); },
      [](const MH_Group* group) -> int32_t { return reinterpret_cast<const G*>(group)->rank(); },
      [](const MH_Group* group) -> int32_t { return reinterpret_cast<const G*>(group)->size(); },
      MH_GROUP_TRAMPOLINE(G, all_reduce),
      MH_GROUP_TRAMPOLINE(G, all_gather),
      MH_GROUP_TRAMPOLINE(G, reduce_scatter),
      MH_GROUP_TRAMPOLINE(G, broadcast),
      MH_GROUP_TRAMPOLINE(G, send),
      MH_GROUP_TRAMPOLINE(G, recv),
      [](MH_Group* group) -> MH_Error* { return guard([&] { reinterpret_cast<G*>(group)->barrier(); }); },
      [](MH_Instance* self, int32_t rank, const char* reason) { detail::as<T>(self)->abort(rank, reason); },
      nullptr, nullptr, nullptr, nullptr,  // the 1.1 calls, filled below when G has them
      nullptr,                             // the 1.4 call, likewise
      nullptr,                             // the 1.7 call, likewise
    };
    if constexpr (v1_1 && kPluginMinor >= 1) {
      using R = typename G::Request;
      a.all_reduce_start = MH_GROUP_START_TRAMPOLINE(G, all_reduce_start);
      a.reduce_scatter_start = MH_GROUP_START_TRAMPOLINE(G, reduce_scatter_start);
      a.request_wait = [](MH_Request* r) -> MH_Error* { return guard([&] { reinterpret_cast<R*>(r)->wait(); }); };
      a.request_destroy = [](MH_Request* r) { delete reinterpret_cast<R*>(r); };
    }
    if constexpr (v1_4 && kPluginMinor >= 4) a.all_gather_start = MH_GROUP_START_TRAMPOLINE(G, all_gather_start);
    if constexpr (v1_7 && kPluginMinor >= 7)
      a.all_to_all = [](MH_Group* group, const MH_AllToAllArgs* args) -> MH_Error* {
        return guard([&] { reinterpret_cast<G*>(group)->all_to_all(*args); });
      };
    return a;
  }();
  return &api;
}

// Tensor parallelism: plan(const MH_ModelShape&, MH_TensorPlan&).
template <class T>
const MH_TensorParallelApi* tensor_parallel_api() {
  static const MH_TensorParallelApi api{
      MH_STRUCT_SIZE(MH_TensorParallelApi, plan),
      [](MH_Instance* self, const MH_ModelShape* shape, MH_TensorPlan* out) -> MH_Error* {
        return guard([&] { detail::fill_out(out, [&](MH_TensorPlan& p) { detail::as<T>(self)->plan(*shape, p); }); });
      },
  };
  return &api;
}

// Expert parallelism: plan(int64_t experts, int32_t data_parallel, MH_ExpertPlan&).
template <class T>
const MH_ExpertParallelApi* expert_parallel_api() {
  static const MH_ExpertParallelApi api{
      MH_STRUCT_SIZE(MH_ExpertParallelApi, plan),
      [](MH_Instance* self, int64_t experts, int32_t dp, MH_ExpertPlan* out) -> MH_Error* {
        return guard(
            [&] { detail::fill_out(out, [&](MH_ExpertPlan& p) { detail::as<T>(self)->plan(experts, dp, p); }); });
      },
  };
  return &api;
}

// Pipeline parallelism: plan(const MH_ModelShape&, int32_t dp, MH_PipelinePlan&),
// std::span<const MH_PipeAction> schedule(int32_t stage).
template <class T>
const MH_PipelineParallelApi* pipeline_parallel_api() {
  static const MH_PipelineParallelApi api{
      MH_STRUCT_SIZE(MH_PipelineParallelApi, schedule),
      [](MH_Instance* self, const MH_ModelShape* shape, int32_t dp, MH_PipelinePlan* out) -> MH_Error* {
        return guard([&] { detail::fill_out(out, [&](MH_PipelinePlan& p) { detail::as<T>(self)->plan(*shape, dp, p); }); });
      },
      [](MH_Instance* self, int32_t stage, const MH_PipeAction** actions, size_t* count) -> MH_Error* {
        return guard([&] {
          std::span<const MH_PipeAction> s = detail::as<T>(self)->schedule(stage);
          *actions = s.data();
          *count = s.size();
        });
      },
  };
  return &api;
}

// Data parallelism: plan(int32_t dp, std::span<const uint64_t> param_bytes, MH_DataPlan&).
template <class T>
const MH_DataParallelApi* data_parallel_api() {
  static const MH_DataParallelApi api{
      MH_STRUCT_SIZE(MH_DataParallelApi, plan),
      [](MH_Instance* self, int32_t dp, const uint64_t* bytes, size_t n, MH_DataPlan* out) -> MH_Error* {
        return guard([&] {
          detail::fill_out(out, [&](MH_DataPlan& p) { detail::as<T>(self)->plan(dp, std::span<const uint64_t>(bytes, n), p); });
        });
      },
  };
  return &api;
}

// Context parallelism: plan(const MH_ModelShape&, MH_ContextPlan&).
template <class T>
const MH_ContextParallelApi* context_parallel_api() {
  static const MH_ContextParallelApi api{
      MH_STRUCT_SIZE(MH_ContextParallelApi, plan),
      [](MH_Instance* self, const MH_ModelShape* shape, MH_ContextPlan* out) -> MH_Error* {
        return guard([&] { detail::fill_out(out, [&](MH_ContextPlan& p) { detail::as<T>(self)->plan(*shape, p); }); });
      },
  };
  return &api;
}

// Recompute: MH_Decision decide(const MH_RecomputeQuery&).
template <class T>
const MH_RecomputeApi* recompute_api() {
  static const MH_RecomputeApi api{
      MH_STRUCT_SIZE(MH_RecomputeApi, decide),
      [](MH_Instance* self, const MH_RecomputeQuery* q, int32_t* decision) -> MH_Error* {
        return guard([&] { *decision = detail::as<T>(self)->decide(*q); });
      },
  };
  return &api;
}

// Tuner: bool next(const MH_ModelShape&, MH_Candidate&) (false when done),
// report(const MH_Candidate&, const MH_Estimate&); since ABI 1.1 also
// needs(MH_TunerNeeds&), begin(const MH_ModelShape&, const MH_Hardware&) and
// std::span<const MH_TunerResult> results(); since ABI 1.4 also
// recompute_policies(std::span<const char* const> names). The table has
// the target minor's length; an entry whose method the class lacks is NULL.
template <class T>
const MH_TunerApi* tuner_api() {
  using Next = MH_Error* (*)(MH_Instance*, const MH_ModelShape*, MH_Candidate*, int32_t*);
  using Report = MH_Error* (*)(MH_Instance*, const MH_Candidate*, const MH_Estimate*);
  static constexpr bool v1_1 = requires(T& t) { t.results(); };
  static constexpr bool v1_4 = requires(T& t, std::span<const char* const> n) { t.recompute_policies(n); };
  static_assert(v1_1 || !v1_4, "recompute_policies needs the 1.1 methods");
  static const MH_TunerApi api = [] {
    MH_TunerApi a{};
    a.struct_size = kPluginMinor >= 4   ? MH_STRUCT_SIZE(MH_TunerApi, recompute_policies)
                    : kPluginMinor >= 1 ? MH_STRUCT_SIZE(MH_TunerApi, results)
                                        : MH_STRUCT_SIZE(MH_TunerApi, report);
    a.next = Next([](MH_Instance* self, const MH_ModelShape* shape, MH_Candidate* out, int32_t* done) -> MH_Error* {
      return guard([&] {
        bool more = false;
        detail::fill_out(out, [&](MH_Candidate& c) { more = detail::as<T>(self)->next(*shape, c); });
        *done = more ? 0 : 1;
      });
    });
    a.report = Report([](MH_Instance* self, const MH_Candidate* c, const MH_Estimate* e) -> MH_Error* {
      return guard([&] { detail::as<T>(self)->report(*c, *e); });
    });
    if constexpr (v1_1 && kPluginMinor >= 1) {
      a.needs = [](MH_Instance* self, MH_TunerNeeds* out) -> MH_Error* {
        return guard([&] { detail::fill_out(out, [&](MH_TunerNeeds& n) { detail::as<T>(self)->needs(n); }); });
      };
      a.begin = [](MH_Instance* self, const MH_ModelShape* shape, const MH_Hardware* hw) -> MH_Error* {
        return guard([&] { detail::as<T>(self)->begin(*shape, *hw); });
      };
      a.results = [](MH_Instance* self, const MH_TunerResult** rows, size_t* count) -> MH_Error* {
        return guard([&] {
          std::span<const MH_TunerResult> r = detail::as<T>(self)->results();
          *rows = r.data();
          *count = r.size();
        });
      };
    }
    if constexpr (v1_4 && kPluginMinor >= 4)
      a.recompute_policies = [](MH_Instance* self, const char* const* names, size_t count) -> MH_Error* {
        return guard([&] { detail::as<T>(self)->recompute_policies(std::span<const char* const>(names, count)); });
      };
    return a;
  }();
  return &api;
}

// Observer (ABI 1.5): void on_event(const MH_Event&); an exception it
// throws is logged and dropped (the call has no error to return).
template <class T>
const MH_ObserverApi* observer_api() {
  static_assert(kPluginMinor >= 5 || sizeof(T) == 0, "observers need ABI 1.5 (MH_PLUGIN_MINOR)");
  static const MH_ObserverApi api{
      MH_STRUCT_SIZE(MH_ObserverApi, on_event),
      [](MH_Instance* self, const MH_Event* event) {
        if (MH_Error* e = guard([&] { detail::as<T>(self)->on_event(*event); })) {
          log(MH_LOG_WARNING, std::string("observer dropped an event: ") + (e->message ? e->message : ""));
          e->destroy(e);
        }
      },
  };
  return &api;
}

template <class T>
const void* api_for() {
  if constexpr (T::kind == MH_KIND_KERNELS) return kernels_api<T>();
  else if constexpr (T::kind == MH_KIND_COMM) return comm_api<T>();
  else if constexpr (T::kind == MH_KIND_TENSOR_PARALLEL) return tensor_parallel_api<T>();
  else if constexpr (T::kind == MH_KIND_PIPELINE_PARALLEL) return pipeline_parallel_api<T>();
  else if constexpr (T::kind == MH_KIND_DATA_PARALLEL) return data_parallel_api<T>();
  else if constexpr (T::kind == MH_KIND_RECOMPUTE) return recompute_api<T>();
  else if constexpr (T::kind == MH_KIND_OBSERVER) return observer_api<T>();
  else if constexpr (T::kind == MH_KIND_CONTEXT_PARALLEL) return context_parallel_api<T>();
  else if constexpr (T::kind == MH_KIND_EXPERT_PARALLEL) return expert_parallel_api<T>();
  else return tuner_api<T>();
}

// The descriptor of a component class T whose function table `api` is
// written by hand (a wrapper forwarding C calls whose handles are another
// component's, say); create and destroy are component<T>'s. `api` and
// `options` must outlive the library (static).
template <class T>
MH_ComponentDesc component_with_table(MH_Kind kind, const char* name, const char* version, const char* description,
                                      std::span<const MH_OptionSpec> options, const void* api) {
  return MH_ComponentDesc{
      MH_STRUCT_SIZE(MH_ComponentDesc, api),
      kind,
      name,
      version,
      description,
      options.data(),
      options.size(),
      [](const MH_CreateArgs* args, MH_Instance** out) -> MH_Error* {
        return guard([&] {
          const MH_Options* inner = reaches(*args, &MH_CreateArgs::inner_options) ? args->inner_options : nullptr;
          CreateContext ctx{Options(args->options), args->ranks_in_process, args->rank, inner};
          *out = reinterpret_cast<MH_Instance*>(new T(ctx));
        });
      },
      [](MH_Instance* self) { delete detail::as<T>(self); },
      api,
  };
}

// The descriptor of component class T, its table built from its methods
// (above); `options` must outlive the library (a static array).
template <class T>
MH_ComponentDesc component(const char* name, const char* version, const char* description,
                           std::span<const MH_OptionSpec> options = {}) {
  return component_with_table<T>(T::kind, name, version, description, options, api_for<T>());
}

}  // namespace mh

// Defines the plugin's entry point (MH_ENTRY_SYMBOL) listing its components.
#define MH_PLUGIN(mh_name, mh_version, ...)                                          \
  extern "C" MH_EXPORT MH_Error* mh_plugin_entry_v1(const MH_HostApi* host,                 \
                                                    const MH_PluginDesc** out) {            \
    return ::mh::guard([&] {                                                                 \
      ::mh::detail::host_api = host;                                                         \
      ::mh::detail::plugin_name = mh_name;                                               \
      static const MH_ComponentDesc components[] = {__VA_ARGS__};                            \
      static const MH_PluginDesc desc{MH_STRUCT_SIZE(MH_PluginDesc, option_size),            \
                                      MH_ABI_MAJOR,                                          \
                                      ::mh::kPluginMinor,                                    \
                                      mh_name,                                               \
                                      mh_version,                                            \
                                      components,                                            \
                                      sizeof(components) / sizeof(components[0]),            \
                                      sizeof(MH_ComponentDesc),                              \
                                      sizeof(MH_OptionSpec)};                                \
      *out = &desc;                                                                          \
    });                                                                                      \
  }
