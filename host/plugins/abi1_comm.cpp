// A communicator built for ABI 1.x behind a 2.0 MH_CommApi. Its calls kept
// their order; the collectives' args embed MH_Tensor, which grew, so they
// are converted as the kernels' are. Most calls name a group or a request
// rather than the instance, so the adapter wraps those too: each carries
// its component, whose 1.x table the trampoline calls.
#include <array>
#include <cstddef>

#include "plugins/abi1_component.hpp"

namespace mh::abi1 {

template <>
constexpr size_t kV1Sizeof<MH_CollectiveArgs> = 184;
template <>
constexpr size_t kV1Sizeof<MH_AllToAllArgs> = 192;

namespace {

const V1CommApi& v1_of(const MH_Group* g) { return group(g).component->v1<V1CommApi>(); }

// A 1.x communicator cannot refuse a tensor placed off its device, and 1.x
// never said which device that is: a call whose send and recv lie on
// different devices is refused here.
MH_Error* on_one_device(const MH_Group* g, const MH_Tensor& send, const MH_Tensor& recv) {
  if (recv.data == nullptr) return nullptr;
  return guard([&] {
    require_on_device(group(g).component->name.c_str(), "send", send, placement_of(recv), "the call's recv");
  });
}

MH_Group* wrap(const Component* c, MH_Group* inner) { return reinterpret_cast<MH_Group*>(new Group{c, inner}); }

MH_Error* info(MH_Instance* self, MH_CommInfo* out) { return v1<V1CommApi>(self).info(instance(self).inner, out); }

// World groups belong to the instance: one wrapper each, made once.
MH_Error* world(MH_Instance* self, int32_t local, MH_Group** out) {
  Instance& i = instance(self);
  std::lock_guard lock(i.mutex);
  std::unique_ptr<Group>& mine = i.worlds[local];
  if (mine == nullptr) {
    MH_Group* inner = nullptr;
    if (MH_Error* e = i.component->v1<V1CommApi>().world(i.inner, local, &inner)) return e;
    mine.reset(new Group{i.component, inner});
  }
  *out = reinterpret_cast<MH_Group*>(mine.get());
  return nullptr;
}

MH_Error* split(MH_Group* g, int32_t color, int32_t key, MH_Group** out) {
  MH_Group* inner = nullptr;
  if (MH_Error* e = v1_of(g).split(group(g).inner, color, key, &inner)) return e;
  return guard([&] { *out = wrap(group(g).component, inner); });
}

void group_destroy(MH_Group* g) {
  if (g == nullptr) return;
  std::unique_ptr<Group> owned(&group(g));
  owned->component->v1<V1CommApi>().group_destroy(owned->inner);
}

int32_t group_rank(const MH_Group* g) { return v1_of(g).group_rank(group(g).inner); }
int32_t group_size(const MH_Group* g) { return v1_of(g).group_size(group(g).inner); }

template <MH_Error* (*V1CommApi::*theirs)(MH_Group*, const void*)>
MH_Error* collective(MH_Group* g, const MH_CollectiveArgs* args) {
  if (MH_Error* e = on_one_device(g, args->send, args->recv)) return e;
  const V1Args<MH_CollectiveArgs> converted(args);
  return (v1_of(g).*theirs)(group(g).inner, converted.get());
}

MH_Error* barrier(MH_Group* g) { return v1_of(g).barrier(group(g).inner); }

void abort_rank(MH_Instance* self, int32_t rank, const char* reason) {
  v1<V1CommApi>(self).abort(instance(self).inner, rank, reason);
}

template <MH_Error* (*V1CommApi::*theirs)(MH_Group*, const void*, MH_Request**)>
MH_Error* start(MH_Group* g, const MH_CollectiveArgs* args, MH_Request** out) {
  if (MH_Error* e = on_one_device(g, args->send, args->recv)) return e;
  const V1Args<MH_CollectiveArgs> converted(args);
  MH_Request* inner = nullptr;
  if (MH_Error* e = (v1_of(g).*theirs)(group(g).inner, converted.get(), &inner)) return e;
  return guard([&] { *out = reinterpret_cast<MH_Request*>(new Request{group(g).component, inner}); });
}

MH_Error* request_wait(MH_Request* r) { return request(r).component->v1<V1CommApi>().request_wait(request(r).inner); }

void request_destroy(MH_Request* r) {
  if (r == nullptr) return;
  std::unique_ptr<Request> owned(&request(r));
  owned->component->v1<V1CommApi>().request_destroy(owned->inner);
}

MH_Error* all_to_all(MH_Group* g, const MH_AllToAllArgs* args) {
  if (MH_Error* e = on_one_device(g, args->send, args->recv)) return e;
  const V1Args<MH_AllToAllArgs> converted(args);
  return v1_of(g).all_to_all(group(g).inner, converted.get());
}

}  // namespace

void fill_comm(Component& c) {
  const V1CommApi& v = c.v1<V1CommApi>();
  c.ours = MH_CommApi{sizeof(MH_CommApi),
                      &info,
                      &world,
                      &split,
                      &group_destroy,
                      &group_rank,
                      &group_size,
                      &collective<&V1CommApi::all_reduce>,
                      &collective<&V1CommApi::all_gather>,
                      &collective<&V1CommApi::reduce_scatter>,
                      &collective<&V1CommApi::broadcast>,
                      &collective<&V1CommApi::send>,
                      &collective<&V1CommApi::recv>,
                      &barrier,
                      &abort_rank,
                      if_present(&start<&V1CommApi::all_reduce_start>, v.all_reduce_start),
                      if_present(&start<&V1CommApi::reduce_scatter_start>, v.reduce_scatter_start),
                      if_present(&request_wait, v.request_wait),
                      if_present(&request_destroy, v.request_destroy),
                      if_present(&start<&V1CommApi::all_gather_start>, v.all_gather_start),
                      if_present(&all_to_all, v.all_to_all)};
}

}  // namespace mh::abi1
