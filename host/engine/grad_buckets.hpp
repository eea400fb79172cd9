// Gradient buckets: which parameters are reduced together over the data
// group, as runs of the flat gradient buffer, in the order backward
// finalises them (Megatron's DDP buckets).
#pragma once

#include <megahost/abi.h>

#include <span>
#include <vector>

#include "engine/params.hpp"
#include "engine/transformer.hpp"

namespace mh {

struct GradBucket {
  std::vector<int> params;              // parameter ids
  // Reduced over the data group, each a multiple of d elements; those of
  // expert weights (ParamSet::experts) over the expert-data group.
  std::vector<GroupRange> ranges;
  std::vector<GroupRange> replicated;   // slots of replicated parameters (tensor all-reduce with SP or LoRA)
  std::vector<GroupRange> per_head;     // slots of ParamInfo::per_head ones (tensor all-reduce with t > 1)
  bool tied_embedding = false;          // holds wte
};

// This rank's parameters in the order its backward finalises them: chunks
// from last to first, in each the head, the layers in reverse and the
// embedding; wte last, as it is final only after its last use. Frozen
// parameters (the base under LoRA) have no gradient and are left out.
std::vector<int> backward_order(const ParamSet& params, const std::vector<ChunkSpec>& chunks);

// The buckets the data plugin's `plan` assigned to the parameters of
// `order`. Without overlap there is one bucket: every parameter, reduced as
// the whole buffer in one range.
std::vector<GradBucket> make_buckets(const ParamSet& params, std::span<const int> order, const MH_DataPlan& plan);

}  // namespace mh
