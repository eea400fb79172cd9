// GPT2LMHeadModel's tensors (names without "transformer.") against
// Megahost's: Conv1D weights stored [in, out] are transposed, c_attn's
// q | k | v columns regrouped per head.
#pragma once

#include <vector>

#include "convert/tensor_map.hpp"

namespace mh::convert {

std::vector<Link> gpt2_links(const ckpt::ModelShape& m);

}  // namespace mh::convert
