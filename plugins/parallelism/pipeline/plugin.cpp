// The parallel_pipeline plugin: Megatron pipeline parallelism.
#include "megatron_pipeline_parallel.hpp"

MH_PLUGIN("parallel_pipeline", "1.0.0", mh::pipeline::megatron_component())
