// The parallel_expert plugin: Megatron expert parallelism.
#include "megatron_expert_parallel.hpp"

MH_PLUGIN("parallel_expert", "1.0.0", mh::expert::megatron_component())
