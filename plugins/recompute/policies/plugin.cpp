// The recompute plugin: Megatron's activation recomputation policies.
#include "recompute_policies.hpp"

MH_PLUGIN("recompute", "1.0.0", mh::recompute::none_component(), mh::recompute::full_component(),
          mh::recompute::selective_component())
