// The sections a dry run replaces: it needs no device and no launcher.
#pragma once

#include <toml++/toml.h>

#include <optional>

#include "config/config.hpp"
#include "plugins/registry.hpp"

namespace mh {

// The dry kernels, modelling the real ones' compute dtype: the section's
// `dtype`, else the real component's default for it (the cuda kernels
// default to bf16), else f32. So the dry run allocates activations of the
// size the real run will.
toml::table dry_kernels_section(const Config& config, const Registry& registry);

// Unless an MPI launcher started this process, the communicator is thread
// ranks of the world the config names (comm.world_size, else 1, as mpi and
// nccl start alone), whatever its plugin (threads, mpi, nccl), with a
// timeout long enough for that many threads to take turns on this
// machine's cores. Null under a launcher: then the config's comm stays.
std::optional<toml::table> dry_comm_section(const Config& config);

}  // namespace mh
