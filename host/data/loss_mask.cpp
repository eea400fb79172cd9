#include "data/loss_mask.hpp"

#include <filesystem>

#include <megahost/error.hpp>

namespace mh::data {

std::string loss_mask_prefix(const std::string& prefix) { return prefix + "_loss_mask"; }

std::unique_ptr<IndexedDataset> open_loss_mask(const IndexedDataset& tokens) {
  const std::string prefix = loss_mask_prefix(tokens.prefix());
  if (!std::filesystem::exists(prefix + ".idx")) return nullptr;
  auto mask = std::make_unique<IndexedDataset>(prefix);
  const std::string fix = "; the mask belongs to another dataset: re-create both with megahost_prepare --format=sft, "
                          "or remove " + prefix + ".bin/.idx to train on every token";
  const auto disagree = [&](const std::string& what) {
    throw Error(MH_INVALID_ARGUMENT, prefix + ".idx: " + what + " (the loss mask of " + tokens.prefix() + ")" + fix);
  };
  if (mask->dtype() != TokenDType::kUint8)
    disagree("holds " + std::string(dtype_name(mask->dtype())) + " items, but a loss mask holds uint8 (code 1)");
  if (mask->sequence_count() != tokens.sequence_count())
    disagree(std::to_string(mask->sequence_count()) + " sequences, but " + tokens.prefix() + ".idx has " +
             std::to_string(tokens.sequence_count()));
  if (mask->document_count() != tokens.document_count())
    disagree(std::to_string(mask->document_count()) + " documents, but " + tokens.prefix() + ".idx has " +
             std::to_string(tokens.document_count()));
  for (int64_t s = 0; s < tokens.sequence_count(); ++s)
    if (mask->sequence_length(s) != tokens.sequence_length(s))
      disagree("sequence " + std::to_string(s) + " has " + std::to_string(mask->sequence_length(s)) +
               " items, but its tokens are " + std::to_string(tokens.sequence_length(s)));
  for (int64_t d = 0; d <= tokens.document_count(); ++d)
    if (mask->document_begin(d) != tokens.document_begin(d))
      disagree("document " + std::to_string(d) + " starts at sequence " + std::to_string(mask->document_begin(d)) +
               ", but in the tokens at " + std::to_string(tokens.document_begin(d)));
  mask->limit_ids(2, "a loss mask holds 0 and 1 only" + fix);
  return mask;
}

}  // namespace mh::data
