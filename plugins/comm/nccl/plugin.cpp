// The comm_nccl plugin: NCCL collectives on CUDA devices. Loading it touches
// no device; create does (and fails with MH_UNAVAILABLE where there is none).
#include "nccl_comm.hpp"

MH_PLUGIN("comm_nccl", "0.1.0", mh::comm::nccl::nccl_component())
