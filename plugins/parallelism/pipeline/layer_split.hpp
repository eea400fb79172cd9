// Which layers each model chunk holds.
#pragma once

#include "plan_checks.hpp"

#include <megahost/abi.h>

#include <cstdint>
#include <string>
#include <vector>

namespace mh::pipeline {

// `layers` over `chunks` as evenly as possible; when it does not divide,
// the first chunks take one layer more ("3,3,2,2" for 10 over 4).
std::vector<int32_t> even_split(int64_t layers, int32_t chunks);

// "3,5" -> {3, 5}; adds a problem naming `key` for every entry that is not a
// positive whole number.
std::vector<int32_t> parse_layer_counts(const std::string& text, const std::string& key,
                                        plan::Problems& problems);

// "3,3,2,2"
std::string format_layer_counts(const std::vector<int32_t>& counts);

// The layer range of every model chunk, in model order: model chunk k gets
// the next counts[k] layers and lives on stage k % stages as chunk k / stages.
std::vector<MH_StageLayers> assign_layers(const std::vector<int32_t>& counts, int32_t stages);

}  // namespace mh::pipeline
