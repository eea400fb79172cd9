// The parallel_context plugin: Megatron context parallelism.
#include "megatron_context_parallel.hpp"

MH_PLUGIN("parallel_context", "1.0.0", mh::context::megatron_component())
