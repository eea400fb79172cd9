// The parallel_data plugin: Megatron data parallelism.
#include "megatron_data_parallel.hpp"

MH_PLUGIN("parallel_data", "1.0.0", mh::data::megatron_component())
