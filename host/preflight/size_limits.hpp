// Whether the model's sizes fit the 64-bit integers the engine sizes memory
// with. hidden = heads = 100000 and seq_len = 1e7 pass every range check, yet
// micro_batch x heads x seq_len^2 overflows; refusing here names the values
// instead of computing with a wrapped size.
#pragma once

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "config/diagnostics.hpp"

namespace mh {

// Reports each product that sizes memory (bytes of an activation, a weight
// or all layers' state) that exceeds 2^63, naming the config values in it.
void check_size_products(const Config& config, const Assembly& assembly, Diagnostics& diag);

}  // namespace mh
