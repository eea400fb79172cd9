// The model a checkpoint holds, as the engine reads it: its recorded shape
// against the configured one, and its weights alone (no optimizer state)
// for a run that only reads them (generation).
#pragma once

#include <cstdint>
#include <string>

#include "checkpoint/metadata.hpp"
#include "engine/device.hpp"
#include "engine/model.hpp"
#include "engine/params.hpp"

namespace mh::ckpt {

// The model as a checkpoint records it: [model]'s dimensions and parts.
ModelShape checkpoint_model(const ModelDims& d, const std::string& arch);

// Throws naming every difference when the checkpoint at `path` (metadata
// `saved`) holds another model than `d`.
void check_model(const std::string& path, const Metadata& saved, const ModelDims& d);

// Which of a rank's parameters a checkpoint fills: the base model's
// weights, or LoRA's adapters (a LoRA checkpoint holds those alone).
enum class WeightsOf { kBase, kAdapters };

// Fills every weight of `which` that `params` holds (tensor rank `tp_rank`'s
// shards) from the checkpoint's parameters, whatever layout saved them.
void load_weights(const std::string& path, const Metadata& saved, ParamSet& params, int32_t tp_rank,
                  WeightsOf which = WeightsOf::kBase);

}  // namespace mh::ckpt
