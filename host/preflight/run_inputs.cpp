#include "preflight/run_inputs.hpp"

#include <megahost/error.hpp>

#include "data/blend.hpp"

namespace mh {
namespace fs = std::filesystem;
namespace {

// Folders larger than this are not listed whole: a checkpoint folder holds
// a few files per rank and step.
constexpr size_t kMaxFolderEntries = 100000;

void add_dataset_lists(const Config& config, const Options& data, RunInputs& inputs) {
  auto add_prefix = [&](const std::string& prefix, const char* key) {
    const fs::path p = config.resolve(prefix);
    inputs.add(p.string() + ".bin", std::string("data.") + key);
    inputs.add(p.string() + ".idx", std::string("data.") + key);
  };
  add_prefix(data.get_string("path"), "path");
  for (const char* key : {"paths", "train_paths", "valid_paths", "test_paths"}) {
    const std::string text = data.get_string(key);
    if (text.empty()) continue;
    try {
      for (const auto& entry : data::parse_blend(text, std::string("data.") + key)) add_prefix(entry.prefix, key);
    } catch (const Error&) {
      // A malformed list is reported when the data is opened, and nothing
      // is written before that.
    }
  }
}

void add_checkpoints(const Config& config, const Assembly& assembly, RunInputs& inputs) {
  const Options ckpt = assembly.checkpoint.options();
  const std::string dir = ckpt.get_string("dir"), load = ckpt.get_string("load");
  if (!dir.empty()) inputs.add_folder(config.resolve(dir), "checkpoint.dir", 2);
  if (!load.empty() && load != "auto") inputs.add_folder(config.resolve(load), "checkpoint.load", 2);
}

}  // namespace

void RunInputs::add(fs::path path, std::string source) { inputs_.push_back({std::move(path), std::move(source)}); }

void RunInputs::add_folder(const fs::path& folder, const std::string& source, int depth) {
  add(folder, source);
  std::error_code ec;
  if (depth <= 0 || !fs::is_directory(folder, ec)) return;
  size_t seen = 0;
  for (fs::directory_iterator it(folder, ec), end; !ec && it != end && seen < kMaxFolderEntries; it.increment(ec), ++seen) {
    if (it->is_directory(ec)) add_folder(it->path(), source, depth - 1);
    else add(it->path(), source);
  }
}

const RunInput* RunInputs::same_as(const fs::path& output) const {
  for (const auto& input : inputs_) {
    std::error_code ec;
    if (fs::equivalent(output, input.path, ec)) return &input;
  }
  return nullptr;
}

RunInputs run_inputs(const Config& config, const Assembly& assembly, const std::vector<LoadedPlugin>& plugins) {
  RunInputs inputs;
  if (!config.file().empty()) inputs.add(config.file(), "--config");
  const Options data = assembly.data.options();
  add_dataset_lists(config, data, inputs);
  for (const char* key : {"vocab_file", "merges_file", "tokenizer_file"})
    if (!data.get_string(key).empty()) inputs.add(config.resolve(data.get_string(key)), std::string("data.") + key);
  add_checkpoints(config, assembly, inputs);
  if (assembly.generates) {
    const std::string prompts = assembly.generate.options().get_string("prompts_file");
    if (!prompts.empty()) inputs.add(config.resolve(prompts), "generate.prompts_file");
  }
  for (const auto& plugin : plugins) inputs.add(plugin.file, "--plugin_path");
  return inputs;
}

}  // namespace mh
