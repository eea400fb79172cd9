// Communicator "counted_comm": forwards every call to the communicator its
// `inner` option names and counts the collectives, logged when the (one,
// per process) instance is destroyed. Groups are the inner component's own:
// the group calls receive no instance, so they reach the inner table through
// the one this process wraps, which is static (abi.h rule 5) and so one for
// every instance of that component. The table is written against the C ABI
// directly: mh::comm_api<T> would wrap groups in a class of our own.
#include <megahost/plugin.hpp>

#include <atomic>
#include <memory>
#include <string>

namespace {

std::atomic<const MH_CommApi*> inner_api{nullptr};
std::atomic<int64_t> collectives{0};

const MH_CommApi& in() { return *inner_api.load(); }

class CountedComm {
 public:
  static constexpr MH_OptionSpec options[] = {
      mh::opt("inner", MH_VALUE_STRING, nullptr, "the communicator to count", MH_OPTION_INNER),
  };
  explicit CountedComm(const mh::CreateContext& ctx)
      : inner_(MH_KIND_COMM, ctx.options.get_string("inner"), ctx, ctx.inner_options) {
    // The host calls the non-blocking collectives this table offers; it
    // offers them all, so the inner communicator must have them.
    mh::require(inner_.api().all_gather_start != nullptr && inner_.api().request_destroy != nullptr,
                "counted_comm wraps communicators with the non-blocking collectives; " + inner_.name() +
                    " has none",
                MH_INVALID_ARGUMENT);
    inner_api.store(&inner_.api());
  }
  ~CountedComm() {
    mh::log(MH_LOG_INFO, "counted_comm over " + inner_.name() + ": " + std::to_string(collectives.load()) +
                             " collectives");
  }
  MH_Instance* inner() const { return inner_.get(); }

 private:
  mh::InnerComponent<MH_CommApi> inner_;
};

CountedComm* self(MH_Instance* i) { return reinterpret_cast<CountedComm*>(i); }

#define COUNTED(member)                                                            \
  [](MH_Group* g, const MH_CollectiveArgs* a) -> MH_Error* {                       \
    ++collectives;                                                                 \
    return in().member(g, a);                                                      \
  }
#define COUNTED_START(member)                                                      \
  [](MH_Group* g, const MH_CollectiveArgs* a, MH_Request** out) -> MH_Error* {     \
    ++collectives;                                                                 \
    return in().member(g, a, out);                                                 \
  }

const MH_CommApi kApi{
    MH_STRUCT_SIZE(MH_CommApi, all_gather_start),
    [](MH_Instance* s, MH_CommInfo* out) { return in().info(self(s)->inner(), out); },
    [](MH_Instance* s, int32_t local, MH_Group** out) { return in().world(self(s)->inner(), local, out); },
    [](MH_Group* g, int32_t color, int32_t key, MH_Group** out) { return in().split(g, color, key, out); },
    [](MH_Group* g) { in().group_destroy(g); },
    [](const MH_Group* g) { return in().group_rank(g); },
    [](const MH_Group* g) { return in().group_size(g); },
    COUNTED(all_reduce),
    COUNTED(all_gather),
    COUNTED(reduce_scatter),
    COUNTED(broadcast),
    COUNTED(send),
    COUNTED(recv),
    [](MH_Group* g) { return in().barrier(g); },
    [](MH_Instance* s, int32_t rank, const char* reason) { in().abort(self(s)->inner(), rank, reason); },
    COUNTED_START(all_reduce_start),
    COUNTED_START(reduce_scatter_start),
    [](MH_Request* r) { return in().request_wait(r); },
    [](MH_Request* r) { in().request_destroy(r); },
    COUNTED_START(all_gather_start),
};

}  // namespace

MH_PLUGIN("counted_comm", "1.0.0",
          mh::component_with_table<CountedComm>(MH_KIND_COMM, "counted_comm", "1.0.0",
                                                "counts the collectives of the communicator it wraps",
                                                CountedComm::options, &kApi, nullptr))
