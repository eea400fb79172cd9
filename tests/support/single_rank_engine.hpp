// One rank of the engine in-process, for tests of the engine's pieces: the
// built cpu kernels and threads communicator of an EngineEnv, a device, the
// world group, a tensor plan of one rank and the parameters of a whole
// model (every layer, the embedding and the head).
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>

#include <cstdint>
#include <vector>

#include "engine/collectives.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"
#include "engine/tensor_parallel.hpp"
#include "engine/tensor_weights.hpp"
#include "support/engine_env.hpp"

namespace mh::test {

struct SingleRankEngine {
  SingleRankEngine(const EngineEnv& env, const ModelDims& d, uint64_t seed = 7)
      : kernels(env.slot(MH_KIND_KERNELS), 1, 0),
        comm(env.slot(MH_KIND_COMM), 0, -1),
        dev(kernels),
        world(make_world()),
        plan(single_rank_plan()),
        params(dev, d, plan, seed, whole_model(d)),
        tp(dev, world, plan, d) {}

  Collectives make_world() {
    MH_Group* g = nullptr;
    check(comm.api<MH_CommApi>()->world(comm.get(), 0, &g));
    return Collectives(comm.api<MH_CommApi>(), g, "world", false);
  }
  static OwnedParts whole_model(const ModelDims& d) {
    OwnedParts all{{}, true, true};
    for (int64_t l = 0; l < d.layers; ++l) all.layers.push_back(l);
    return all;
  }
  // One rank: every weight replicated (the shards live as long as the test).
  static MH_TensorPlan single_rank_plan() {
    static TensorShards replicated = [] {
      TensorShards s;
      s.fill(MH_SHARD_NONE);
      return s;
    }();
    MH_TensorPlan p{};
    p.size = 1;
    p.shard = replicated.data();
    return p;
  }

  // f32 buffers to and from the device.
  Buffer upload(const std::vector<float>& values, MemCategory category = MemCategory::kWorkspace) {
    Buffer b(dev, category, int64_t(values.size()));
    dev.to_device(b.data(), values.data(), values.size() * 4);
    return b;
  }
  std::vector<float> download(TypedPtr p, int64_t elements) {
    std::vector<float> out(static_cast<size_t>(elements));
    dev.to_host(out.data(), p.data, out.size() * 4);
    return out;
  }
  std::vector<float> weight(int id) { return download(params.weight(id), params.info(id).numel()); }
  std::vector<float> grad(int id) { return download(params.grad(id), params.info(id).numel()); }

  Instance kernels, comm;
  Device dev;
  Collectives world;
  MH_TensorPlan plan;
  ParamSet params;
  TensorParallel tp;
};

}  // namespace mh::test
