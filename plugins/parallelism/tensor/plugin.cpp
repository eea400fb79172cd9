// The parallel_tensor plugin: Megatron tensor (and sequence) parallelism.
#include "megatron_tensor_parallel.hpp"

MH_PLUGIN("parallel_tensor", "1.0.0", mh::tensor::megatron_component())
