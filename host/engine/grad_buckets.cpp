#include "engine/grad_buckets.hpp"

#include <algorithm>
#include <utility>

namespace mh {
namespace {

bool replicated(const ParamInfo& p) {
  return p.group == ParamGroup::kReplicatedDecay || p.group == ParamGroup::kReplicatedNoDecay ||
         p.group == ParamGroup::kAdapterReplicated;
}

// The slots of `ids`, adjacent ones merged unless one holds expert weights
// and the other not (they go to different groups), in buffer order.
std::vector<GroupRange> slot_ranges(const ParamSet& params, std::vector<int> ids) {
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return params.info(a).offset < params.info(b).offset; });
  std::vector<GroupRange> ranges;
  for (int id : ids) {
    const GroupRange slot{params.info(id).offset, params.slot(id)};
    if (!ranges.empty() && ranges.back().offset + ranges.back().count == slot.offset &&
        params.experts(ranges.back()) == params.experts(slot))
      ranges.back().count += slot.count;
    else
      ranges.push_back(slot);
  }
  return ranges;
}

// The trainable buffer as one range, or two when expert weights end it.
std::vector<GroupRange> whole_buffer(const ParamSet& params) {
  const int64_t end = params.trainable_numel(), experts = params.group(ParamGroup::kExpertDecay).offset;
  if (experts <= 0 || experts >= end) return {{0, end}};
  return {{0, experts}, {experts, end - experts}};
}

GradBucket bucket_of(const ParamSet& params, std::vector<int> ids, bool whole) {
  GradBucket b;
  std::vector<int> shared, per_head;
  for (int id : ids) {
    if (params.info(id).per_head) per_head.push_back(id);
    else if (replicated(params.info(id))) shared.push_back(id);
    b.tied_embedding |= id == params.wte();
  }
  b.replicated = slot_ranges(params, shared);
  b.per_head = slot_ranges(params, per_head);
  b.ranges = whole ? whole_buffer(params) : slot_ranges(params, ids);
  b.params = std::move(ids);
  return b;
}

}  // namespace

std::vector<int> backward_order(const ParamSet& params, const std::vector<ChunkSpec>& chunks) {
  std::vector<int> order;
  for (auto c = chunks.rbegin(); c != chunks.rend(); ++c) {
    if (c->last)
      for (int id : params.head_ids())
        if (id != params.wte()) order.push_back(id);
    for (int64_t l = c->first_layer + c->layers - 1; l >= c->first_layer; --l) {
      const std::vector<int> ids = params.layer(l).ids();
      order.insert(order.end(), ids.begin(), ids.end());
    }
    if (c->first && params.wpe() >= 0) order.push_back(params.wpe());
  }
  if (params.wte() >= 0) order.push_back(params.wte());
  std::erase_if(order, [&](int id) { return !params.trainable(id); });
  return order;
}

std::vector<GradBucket> make_buckets(const ParamSet& params, std::span<const int> order, const MH_DataPlan& plan) {
  if (!plan.overlap) return {bucket_of(params, {order.begin(), order.end()}, true)};
  std::vector<GradBucket> buckets;
  std::vector<int> ids;
  for (size_t i = 0; i < order.size(); ++i) {
    ids.push_back(order[i]);
    if (i + 1 == order.size() || plan.bucket_of[i + 1] != plan.bucket_of[i])
      buckets.push_back(bucket_of(params, std::exchange(ids, {}), false));
  }
  return buckets;
}

}  // namespace mh
