// Every file a run will read, in one registry that every output is checked
// against before anything is read or written: a run that wrote over one of
// them would destroy the user's data (a dataset, a checkpoint being loaded,
// an HF folder's weights, the prompts).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plugins/assembly.hpp"
#include "plugins/plugin_loader.hpp"

namespace mh {

struct RunInput {
  std::filesystem::path path;
  std::string source;  // the key or flag that names it: "data.paths", "checkpoint.load", ...
};

class RunInputs {
 public:
  void add(std::filesystem::path path, std::string source);
  // The folder and every file in it and in its sub-folders, `depth` levels
  // down (a checkpoint folder: step_*/rank_*.safetensors is 2).
  void add_folder(const std::filesystem::path& folder, const std::string& source, int depth);

  // The input `output` is the same file as, or nullptr. Only existing files
  // can be the same.
  const RunInput* same_as(const std::filesystem::path& output) const;
  const std::vector<RunInput>& all() const { return inputs_; }

 private:
  std::vector<RunInput> inputs_;
};

// The run's inputs from its config: the config itself, every dataset prefix
// of data.path, data.paths and the split lists (.bin and .idx), the
// tokenizer files, generate.prompts_file, what checkpoint.load names (a
// checkpoint, a folder of them, an HF folder) and checkpoint.dir's
// checkpoints, and the plugins.
RunInputs run_inputs(const Config& config, const Assembly& assembly, const std::vector<LoadedPlugin>& plugins);

}  // namespace mh
