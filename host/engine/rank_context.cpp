#include "engine/rank_context.hpp"

#include <megahost/error.hpp>

namespace mh {
namespace {

RankGroups make_groups(const RunSetup& s, int32_t local, int32_t rank, const RankCoordinates& c, const Device& dev) {
  RankGroups g{world_group(s.comm_api, s.comm, local, s.dry_run, dev), {}, {}, {}, {}, {}, {}, {}, {}};
  const int32_t replica = c.replica(s.cp);
  g.tensor = g.world.split(c.pp * s.dp * s.cp + replica, c.tp, "tensor");
  g.context = g.world.split((c.pp * s.dp + c.dp) * s.tp + c.tp, c.cp, "context");
  g.data = g.world.split(c.pp * s.tp + c.tp, replica, "data");
  g.pipeline = g.world.split(replica * s.tp + c.tp, c.pp, "pipeline");
  const bool end = c.pp == 0 || c.pp == s.pp - 1;
  g.embedding = g.world.split(end ? replica * s.tp + c.tp : s.comm_info.world_size + rank, c.pp, "embedding");
  // Within one stage, over its data, context and tensor ranks, as Megatron
  // forms them with an expert tensor-parallel size of 1.
  const int32_t stage = c.pp * s.dp * s.cp * s.tp, slot = c.expert_slot(s.cp, s.tp);
  g.expert = g.world.split(stage + slot / s.ep, slot % s.ep, "expert");
  g.expert_data = g.world.split(stage + slot % s.ep, slot / s.ep, "expert-data");
  g.sequence = g.world.split(c.pp * s.dp + c.dp, c.cp * s.tp + c.tp, "sequence");
  return g;
}

ModelDims rank_dims(const RunSetup& s, const RankCoordinates& c) {
  ModelDims d = s.dims;
  d.tp_rank = c.tp;
  d.cp_rank = c.cp;
  d.ep_rank = c.expert_slot(s.cp, s.tp) % s.ep;
  return d;
}

}  // namespace

RankCoordinates rank_coordinates(const RunSetup& s, int32_t rank) {
  return {rank % s.tp, (rank / s.tp) % s.cp, (rank / (s.tp * s.cp)) % s.dp, rank / (s.tp * s.cp * s.dp)};
}

Collectives world_group(const MH_CommApi* api, MH_Instance* comm, int32_t local, bool dry, const Device& device) {
  MH_Group* world = nullptr;
  check(api->world(comm, local, &world), "comm world group");
  Collectives g(api, world, "world", false);
  g.set_dry(dry);
  g.set_device(device.stream(), device.placement());
  return g;
}

RankContext::RankContext(const RunSetup& s, int32_t local)
    : rank(s.comm_info.first_rank + local),
      coords(rank_coordinates(s, rank)),
      observer(*s.assembly, s.comm_info.ranks_on_node, rank),
      device(*s.assembly->slot(MH_KIND_KERNELS), s.comm_info.ranks_on_node, rank),
      dev(device.dev),
      groups(make_groups(s, local, rank, coords, dev)),
      dims(rank_dims(s, coords)) {}

}  // namespace mh
