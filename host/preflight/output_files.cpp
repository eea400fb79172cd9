#include "preflight/output_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mh {
namespace fs = std::filesystem;
namespace {

// The input `output` is, or nullptr. Only existing files can be the same.
const fs::path* same_as_input(const fs::path& output, const std::vector<fs::path>& inputs) {
  for (const auto& input : inputs) {
    std::error_code ec;
    if (fs::equivalent(output, input, ec)) return &input;
  }
  return nullptr;
}

std::string folder_problem(const fs::path& output) {
  const fs::path folder = output.parent_path().empty() ? fs::path(".") : output.parent_path();
  if (::access(folder.c_str(), W_OK) == 0) return "";
  return "cannot write in folder '" + folder.string() + "': " + std::strerror(errno) +
         "; create it or choose another path";
}

void check_one(const OutputFile& out, const std::vector<fs::path>& inputs, Diagnostics& diag) {
  const std::string what = out.source + " '" + out.path + "'";
  std::error_code ec;
  if (fs::is_directory(out.path, ec)) {
    diag.error(out.source, what + " is a folder; name a file in it");
  } else if (const fs::path* input = same_as_input(out.path, inputs)) {
    diag.error(out.source, what + " is one of the run's inputs (" + input->string() +
                               "); writing it would destroy it: choose another path");
  } else if (std::string problem = folder_problem(out.path); !problem.empty()) {
    diag.error(out.source, what + ": " + problem);
  }
}

}  // namespace

std::vector<fs::path> run_inputs(const Config& config, const Assembly& assembly,
                                 const std::vector<LoadedPlugin>& plugins) {
  std::vector<fs::path> inputs{config.file()};
  Options data = assembly.data.options();
  const fs::path prefix = config.resolve(data.get_string("path"));
  inputs.push_back(prefix.string() + ".bin");
  inputs.push_back(prefix.string() + ".idx");
  for (const char* key : {"vocab_file", "merges_file"})
    if (!data.get_string(key).empty()) inputs.push_back(config.resolve(data.get_string(key)));
  for (const auto& plugin : plugins) inputs.push_back(plugin.file);
  return inputs;
}

void check_output_files(const std::vector<OutputFile>& outputs, const std::vector<fs::path>& inputs,
                        Diagnostics& diag) {
  for (const auto& out : outputs)
    if (!out.path.empty()) check_one(out, inputs, diag);
}

}  // namespace mh
