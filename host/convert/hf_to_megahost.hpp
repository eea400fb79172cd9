// Import: a Hugging Face folder (GPT2LMHeadModel, LlamaForCausalLM) as a
// Megahost checkpoint: metadata.json at step 0 without optimizer state, and
// every global tensor in one safetensors file, checksummed as a saved run's.
#pragma once

#include <string>

#include "checkpoint/metadata.hpp"

namespace mh::convert {

struct ImportOptions {
  // Positions kept: 0 keeps the model's own; fewer trims a learned table.
  int64_t seq_len = 0;
  // The metadata's run fields (seed, batch, schedule, tokenizer); the model,
  // the index and step 0 are filled in.
  ckpt::Metadata run;
};

// Writes the checkpoint folder `out` (which must not exist) from the HF
// folder `in`; returns its metadata. Throws naming the file, tensor or
// config.json field that does not fit.
ckpt::Metadata import_hf(const std::string& in, const std::string& out, const ImportOptions& options);

// A run's `checkpoint.load` of a Hugging Face folder: the folder imported
// into a temporary checkpoint, removed when this is destroyed.
class TemporaryImport {
 public:
  TemporaryImport(const std::string& in, const ImportOptions& options);
  ~TemporaryImport();
  TemporaryImport(const TemporaryImport&) = delete;
  TemporaryImport& operator=(const TemporaryImport&) = delete;
  const std::string& checkpoint() const { return checkpoint_; }

 private:
  std::string root_, checkpoint_;
};

}  // namespace mh::convert
