// Before anything runs: the kernels plugin has every op the model's parts
// call (a plugin of an older minor lacks the later ops, docs/models.md).
#pragma once

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "config/diagnostics.hpp"
#include "engine/model.hpp"

namespace mh {

void check_kernel_ops(const Config& config, const Assembly& assembly, const ModelSpec& spec, Diagnostics& diag);

}  // namespace mh
