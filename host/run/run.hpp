// Runs an assembled pipeline: trains, generates when the config has
// [generate], or with --evaluate evaluates the model alone (main hands a
// config with [tuner] to tuner/tune.hpp instead).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "data/data_sources.hpp"
#include "data/tokenizer.hpp"
#include "engine/model.hpp"

namespace mh {

struct RunFlags {
  bool dry_run = false;
  bool evaluate = false;  // evaluate the model on the valid and test splits; train nothing
  std::string metrics_out;
  bool report_memory = false;
  std::string grads_out;
  // The run against the dry kernels, to check each rank's planned memory
  // before step 1 (memory_preflight.hpp); none skips the check.
  const Assembly* memory_plan = nullptr;
};

// The vocabulary the model's ids must lie in, before padding: model.vocab,
// or the tokenizer's when that is 0; `source` says which, for messages.
struct ModelVocab {
  int64_t size;
  std::string source;
};
ModelVocab model_vocab(const Assembly& assembly, const Config& config);
// The tokenizer [data] names, with its files resolved against the config.
std::unique_ptr<data::Tokenizer> run_tokenizer(const Assembly& assembly, const Config& config);

// The [data] keys that name the datasets and cut them into splits.
data::DataKeys data_keys(const Assembly& assembly);

// The model as the config describes it, the vocabulary padded as the
// engine pads it; model_dims unchecked, global_dims refusing the first of
// shape_problems (validation reports them all).
ModelDims model_dims(const Assembly& assembly, const Config& config);
std::vector<std::string> shape_problems(const ModelDims& d);
ModelDims global_dims(const Assembly& assembly, const Config& config);
// The shape the planning plugins see.
MH_ModelShape model_shape(const ModelDims& d, int64_t micro_batch, int64_t global_batch, int32_t world);

// Returns the process exit status; throws mh::Error on failure.
int run(const Assembly& assembly, const Config& config, const RunFlags& flags);

}  // namespace mh
