// megahost_prepare's work: read documents, tokenize them on several
// workers, and write one indexed dataset per JSON key, in input order, so the
// result does not depend on the number of workers.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "data/chat_template.hpp"
#include "data/tokenizer.hpp"

namespace mh::data {

struct PrepareOptions {
  std::string input;
  std::vector<std::string> json_keys = {"text"};
  // One key: PREFIX.bin/.idx; several: PREFIX_<key>.bin/.idx each.
  std::string output_prefix;
  bool append_eod = true;
  int workers = 1;
  // Skip and count documents that cannot be read or tokenized, instead of
  // stopping at the first.
  bool skip_bad_documents = false;
  // Supervised fine-tuning data (sft_input.hpp) instead of texts under
  // json_keys: writes PREFIX and its loss mask, PREFIX_loss_mask
  // (loss_mask.hpp). chat renders "messages" lines; null refuses them.
  bool sft = false;
  const ChatTemplate* chat = nullptr;
};

struct PrepareReport {
  int64_t documents = 0;  // written (per key, the first key's count)
  int64_t tokens = 0;     // over all keys
  int64_t trained = 0;    // of them, in a loss mask's 1s (sft)
  int64_t skipped = 0;
  std::string first_skipped;  // why the first skipped document was
  int64_t bytes_read = 0;
  double seconds = 0;
};

// Called about once a second with the progress so far.
using OnProgress = std::function<void(const PrepareReport&)>;

// Throws mh::Error naming the input file and line of the first bad
// document (unless skipping), or a write failure; the datasets are then
// left as they were before (IndexedDatasetWriter).
PrepareReport prepare(const PrepareOptions& options, const Tokenizer& tokenizer, const OnProgress& on_progress);

}  // namespace mh::data
