// The [kernels] section a dry run replaces the real one with.
#pragma once

#include <toml++/toml.h>

#include "config.hpp"
#include "registry.hpp"

namespace mh {

// The dry kernels, modelling the real ones' compute dtype: the section's
// `dtype`, else the real component's default for it (the cuda kernels
// default to bf16), else f32. So the dry run allocates activations of the
// size the real run will.
toml::table dry_kernels_section(const Config& config, const Registry& registry);

}  // namespace mh
