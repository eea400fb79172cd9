// The loss mask of a fine-tuning dataset: a sibling indexed dataset,
// PREFIX_loss_mask.bin/.idx, in Megatron's layout with uint8 items (dtype
// code 1), one per token of PREFIX, 1 where the token is trained on as a
// target (a response, an assistant turn) and 0 where it is context only.
// Sequences and documents are those of the tokens, so Megatron reads both
// as ordinary indexed datasets. A dataset without one trains on every token.
#pragma once

#include <memory>
#include <string>

#include "data/indexed_dataset.hpp"

namespace mh::data {

// PREFIX_loss_mask.
std::string loss_mask_prefix(const std::string& prefix);

// The loss mask beside `tokens`, or nullptr when it has none. Throws
// mh::Error naming both files and the fix when the mask's sequences or
// documents disagree with the tokens', or it holds other dtype than uint8;
// reading a value other than 0 or 1 throws later, when it is read.
std::unique_ptr<IndexedDataset> open_loss_mask(const IndexedDataset& tokens);

}  // namespace mh::data
