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
// A plugin targets one minor of ABI major 2: MH_PLUGIN_MINOR, defined before
// this header is included, else this SDK's MH_ABI_MINOR; the descriptor says
// it. (Plugins built for major 1 are the host's adapter's business, not this
// header's.) Every table is built whole; an entry abi.h lets be NULL (the
// non-blocking collectives, all_to_all, the tuner's search calls) is NULL
// when the class lacks its method, while a kernels class that lacks an op
// fails to compile, naming the op. A component's optional features (the
// extension chain, abi.h rule 6) come from its methods likewise: see
// extensions_for below.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>
#include <megahost/options.hpp>
#include <megahost/struct_size.hpp>

#include <algorithm>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <utility>

#ifndef MH_PLUGIN_MINOR
#define MH_PLUGIN_MINOR MH_ABI_MINOR
#endif
static_assert(MH_PLUGIN_MINOR >= 0 && MH_PLUGIN_MINOR <= MH_ABI_MINOR,
              "MH_PLUGIN_MINOR names a minor of ABI 2 this SDK does not know (0 .. MH_ABI_MINOR)");

namespace mh {

// Internal linkage: each translation unit says the minor it targets.
constexpr uint32_t kPluginMinor = MH_PLUGIN_MINOR;

struct CreateContext {
  Options options;
  int32_t ranks_in_process;
  int32_t rank;
  // The options of the component this one wraps (its MH_OPTION_INNER option
  // names it); NULL otherwise. Borrowed for create.
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
// (MH_HostApi::create_component) and destroyed with this object: what a
// wrapper holds of the component it wraps. Api is the kind's table
// (MH_KernelsApi, MH_CommApi, ...), read in the host's layout, so a member
// past the inner plugin's struct_size reads NULL.
template <class Api>
class InnerComponent {
 public:
  // `options`: the values to forward (CreateContext::inner_options), checked
  // by the host against the component's specs, defaults filled in.
  InnerComponent(MH_Kind kind, const std::string& name, const CreateContext& ctx, const MH_Options* options) {
    const MH_HostApi* host = detail::host_api;
    require(host != nullptr && host->create_component != nullptr,
            "wrapping '" + name + "' needs a host with MH_HostApi::create_component", MH_UNIMPLEMENTED);
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
  // The inner component's extension of `type` (MH_StreamExtension, ...), or
  // NULL when it has none.
  template <class Extension>
  const Extension* extension(MH_ExtensionType type) const {
    if (!reaches(*desc_, &MH_ComponentDesc::extensions)) return nullptr;
    return reinterpret_cast<const Extension*>(MH_FindExtension(desc_->extensions, type));
  }

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
// noexcept, copy(dst, src, bytes, MH_CopyKind), synchronize(), `static
// constexpr uint64_t capabilities` (MH_KernelsCapability bits, 0 for none)
// and one method per op taking its args struct by const reference, every op
// of MH_KernelsApi: each group is a static_assert, so a misspelt op is an
// error, not a NULL entry. A class whose ops are enqueued also has
// `void* stream()` (extensions_for).
template <class T>
const MH_KernelsApi* kernels_api() {
  static constexpr bool has_family = requires(T& t, const MH_RmsNormArgs& n, const MH_RmsNormBwdArgs& nb,
                                              const MH_RopeArgs& r, const MH_SwigluArgs& s) {
    t.rmsnorm(n);
    t.rmsnorm_bwd(nb);
    t.rope(r);
    t.swiglu(s);
    t.swiglu_bwd(s);
  };
  static constexpr bool has_copy = requires(T& t, const MH_StridedCopyArgs& c) { t.strided_copy(c); };
  static constexpr bool has_caps = requires { uint64_t{T::capabilities}; };
  static constexpr bool has_attention = requires(T& t, const MH_AttentionArgs& a) {
    t.attention(a);
    t.attention_bwd(a);
  };
  static_assert(has_family, "a kernels class needs rmsnorm, rmsnorm_bwd, rope, swiglu and swiglu_bwd");
  static_assert(has_copy, "a kernels class needs strided_copy");
  static_assert(has_caps, "a kernels class declares static constexpr uint64_t capabilities "
                          "(MH_KernelsCapability bits, 0 for none)");
  static_assert(has_attention, "a kernels class needs attention and attention_bwd");
  static const MH_KernelsApi api{
      MH_STRUCT_SIZE(MH_KernelsApi, attention_bwd),
      T::capabilities,
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
      MH_TRAMPOLINE(T, rmsnorm, MH_RmsNormArgs),
      MH_TRAMPOLINE(T, rmsnorm_bwd, MH_RmsNormBwdArgs),
      MH_TRAMPOLINE(T, rope, MH_RopeArgs),
      MH_TRAMPOLINE(T, swiglu, MH_SwigluArgs),
      MH_TRAMPOLINE(T, swiglu_bwd, MH_SwigluArgs),
      MH_TRAMPOLINE(T, strided_copy, MH_StridedCopyArgs),
      MH_TRAMPOLINE(T, attention, MH_AttentionArgs),
      MH_TRAMPOLINE(T, attention_bwd, MH_AttentionArgs),
  };
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
// belong to the instance. A Group may also offer
// std::unique_ptr<Request> all_reduce_start(args) and reduce_scatter_start(args),
// with a nested class Group::Request that has wait() and whose destructor
// waits for a request still in flight, then all_gather_start(args) returning
// the same Request, and all_to_all(const MH_AllToAllArgs&); the entries of
// those it lacks are NULL (abi.h: the host falls back or names the call).
template <class T>
const MH_CommApi* comm_api() {
  using G = typename T::Group;
  static constexpr bool has_start = requires(G& g, const MH_CollectiveArgs& a) { g.all_reduce_start(a).release(); };
  static constexpr bool has_gather_start =
      requires(G& g, const MH_CollectiveArgs& a) { g.all_gather_start(a).release(); };
  static constexpr bool has_all_to_all = requires(G& g, const MH_AllToAllArgs& a) { g.all_to_all(a); };
  static_assert(has_start || !has_gather_start,
                "all_gather_start needs the requests of all_reduce_start (Group::Request)");
  static const MH_CommApi api = [] {
    MH_CommApi a{
      MH_STRUCT_SIZE(MH_CommApi, all_to_all),
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
      nullptr, nullptr, nullptr, nullptr,  // the non-blocking calls, filled below when G has them
      nullptr,                             // all_gather_start, likewise
      nullptr,                             // all_to_all, likewise
    };
    if constexpr (has_start) {
      using R = typename G::Request;
      a.all_reduce_start = MH_GROUP_START_TRAMPOLINE(G, all_reduce_start);
      a.reduce_scatter_start = MH_GROUP_START_TRAMPOLINE(G, reduce_scatter_start);
      a.request_wait = [](MH_Request* r) -> MH_Error* { return guard([&] { reinterpret_cast<R*>(r)->wait(); }); };
      a.request_destroy = [](MH_Request* r) { delete reinterpret_cast<R*>(r); };
    }
    if constexpr (has_gather_start) a.all_gather_start = MH_GROUP_START_TRAMPOLINE(G, all_gather_start);
    if constexpr (has_all_to_all)
      a.all_to_all = [](MH_Group* group, const MH_AllToAllArgs* args) -> MH_Error* {
        return guard([&] { reinterpret_cast<G*>(group)->all_to_all(*args); });
      };
    return a;
  }();
  return &api;
}

// The planning kinds' one call, plan(const Args&, Plan&) with the kind's
// args struct (MH_TensorPlanArgs, ...): the class fills a zeroed plan.
template <class T, class Args, class Plan>
MH_Error* (*plan_entry())(MH_Instance*, const Args*, Plan*) {
  return [](MH_Instance* self, const Args* args, Plan* out) -> MH_Error* {
    return guard([&] { detail::fill_out(out, [&](Plan& p) { detail::as<T>(self)->plan(*args, p); }); });
  };
}

// Tensor parallelism: plan(const MH_TensorPlanArgs&, MH_TensorPlan&), writing
// args.num_weights entries of plan.shard: the host's array, which the plan
// it hands over keeps (the class checks it is there).
template <class T>
const MH_TensorParallelApi* tensor_parallel_api() {
  static const MH_TensorParallelApi api{
      MH_STRUCT_SIZE(MH_TensorParallelApi, plan),
      [](MH_Instance* self, const MH_TensorPlanArgs* args, MH_TensorPlan* out) -> MH_Error* {
        return guard([&] {
          detail::fill_out(out, [&](MH_TensorPlan& p) {
            p.shard = out->shard;
            detail::as<T>(self)->plan(*args, p);
          });
        });
      },
  };
  return &api;
}

// Expert parallelism: plan(const MH_ExpertPlanArgs&, MH_ExpertPlan&).
template <class T>
const MH_ExpertParallelApi* expert_parallel_api() {
  static const MH_ExpertParallelApi api{MH_STRUCT_SIZE(MH_ExpertParallelApi, plan),
                                        plan_entry<T, MH_ExpertPlanArgs, MH_ExpertPlan>()};
  return &api;
}

// Pipeline parallelism: plan(const MH_PipelinePlanArgs&, MH_PipelinePlan&),
// std::span<const MH_PipeAction> schedule(int32_t stage).
template <class T>
const MH_PipelineParallelApi* pipeline_parallel_api() {
  static const MH_PipelineParallelApi api{
      MH_STRUCT_SIZE(MH_PipelineParallelApi, schedule),
      plan_entry<T, MH_PipelinePlanArgs, MH_PipelinePlan>(),
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

// Data parallelism: plan(const MH_DataPlanArgs&, MH_DataPlan&).
template <class T>
const MH_DataParallelApi* data_parallel_api() {
  static const MH_DataParallelApi api{MH_STRUCT_SIZE(MH_DataParallelApi, plan),
                                      plan_entry<T, MH_DataPlanArgs, MH_DataPlan>()};
  return &api;
}

// Context parallelism: plan(const MH_ContextPlanArgs&, MH_ContextPlan&).
template <class T>
const MH_ContextParallelApi* context_parallel_api() {
  static const MH_ContextParallelApi api{MH_STRUCT_SIZE(MH_ContextParallelApi, plan),
                                         plan_entry<T, MH_ContextPlanArgs, MH_ContextPlan>()};
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
// report(const MH_Candidate&, const MH_Estimate&); to search, also
// needs(MH_TunerNeeds&), begin(const MH_ModelShape&, const MH_Hardware&) and
// std::span<const MH_TunerResult> results() (NULL when the class lacks
// results(): a tuner that only proposes and hears), and
// recompute_policies(std::span<const char* const> names) (NULL when the
// class lacks it).
template <class T>
const MH_TunerApi* tuner_api() {
  using Next = MH_Error* (*)(MH_Instance*, const MH_ModelShape*, MH_Candidate*, int32_t*);
  using Report = MH_Error* (*)(MH_Instance*, const MH_Candidate*, const MH_Estimate*);
  static constexpr bool searches = requires(T& t) { t.results(); };
  static constexpr bool lists_policies =
      requires(T& t, std::span<const char* const> n) { t.recompute_policies(n); };
  static const MH_TunerApi api = [] {
    MH_TunerApi a{};
    a.struct_size = MH_STRUCT_SIZE(MH_TunerApi, recompute_policies);
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
    if constexpr (searches) {
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
    if constexpr (lists_policies)
      a.recompute_policies = [](MH_Instance* self, const char* const* names, size_t count) -> MH_Error* {
        return guard([&] { detail::as<T>(self)->recompute_policies(std::span<const char* const>(names, count)); });
      };
    return a;
  }();
  return &api;
}

// Observer: void on_event(const MH_Event&); an exception it throws is logged
// and dropped (the call has no error to return).
template <class T>
const MH_ObserverApi* observer_api() {
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

// The extension chain of component class T (abi.h rule 6), built from its
// methods as the tables are: a kernels class with `void* stream()` (its ops
// are enqueued on that native stream) has MH_EXTENSION_STREAM. NULL when it
// has none.
template <class T>
const MH_Extension* extensions_for() {
  if constexpr (T::kind == MH_KIND_KERNELS && requires(T& t) { static_cast<void*>(t.stream()); }) {
    static const MH_StreamExtension stream{
        {MH_STRUCT_SIZE(MH_StreamExtension, stream), MH_EXTENSION_STREAM, nullptr},
        [](MH_Instance* self) -> void* { return detail::as<T>(self)->stream(); },
    };
    return &stream.base;
  } else {
    return nullptr;
  }
}

// The descriptor of a component class T whose function table `api` is
// written by hand (a wrapper forwarding C calls whose handles are another
// component's, say), with the extension chain `extensions` (NULL for none);
// create and destroy are component<T>'s. `api`, `options` and `extensions`
// must outlive the library (static).
template <class T>
MH_ComponentDesc component_with_table(MH_Kind kind, const char* name, const char* version, const char* description,
                                      std::span<const MH_OptionSpec> options, const void* api,
                                      const MH_Extension* extensions) {
  return MH_ComponentDesc{
      MH_STRUCT_SIZE(MH_ComponentDesc, extensions),
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
      extensions,
  };
}

// The descriptor of component class T, its table and extensions built from
// its methods (above); `options` must outlive the library (a static array).
template <class T>
MH_ComponentDesc component(const char* name, const char* version, const char* description,
                           std::span<const MH_OptionSpec> options = {}) {
  return component_with_table<T>(T::kind, name, version, description, options, api_for<T>(), extensions_for<T>());
}

}  // namespace mh

static_assert(std::string_view(MH_ENTRY_SYMBOL) == "mh_plugin_entry_v2",
              "MH_PLUGIN below defines the entry point of another major than abi.h's MH_ENTRY_SYMBOL");

// Defines the plugin's entry point (MH_ENTRY_SYMBOL) listing its components.
#define MH_PLUGIN(mh_name, mh_version, ...)                                          \
  extern "C" MH_EXPORT MH_Error* mh_plugin_entry_v2(const MH_HostApi* host,                 \
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
