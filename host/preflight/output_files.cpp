#include "preflight/output_files.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace mh {
namespace fs = std::filesystem;
namespace {

std::string folder_problem(const fs::path& output) {
  const fs::path folder = output.parent_path().empty() ? fs::path(".") : output.parent_path();
  if (::access(folder.c_str(), W_OK) == 0) return "";
  return "cannot write in folder '" + folder.string() + "': " + std::strerror(errno) +
         "; create it or choose another path";
}

void check_one(const OutputFile& out, const RunInputs& inputs, Diagnostics& diag) {
  const std::string what = out.source + " '" + out.path + "'";
  std::error_code ec;
  if (fs::is_directory(out.path, ec)) {
    diag.error(out.source, what + " is a folder; name a file in it");
  } else if (const RunInput* input = inputs.same_as(out.path)) {
    diag.error(out.source, what + " is one of the run's inputs (" + input->path.string() + ", read as " +
                               input->source + "); writing it would destroy it: choose another path");
  } else if (std::string problem = folder_problem(out.path); !problem.empty()) {
    diag.error(out.source, what + ": " + problem);
  }
}

}  // namespace

void check_output_files(const std::vector<OutputFile>& outputs, const RunInputs& inputs, Diagnostics& diag) {
  for (const auto& out : outputs)
    if (!out.path.empty()) check_one(out, inputs, diag);
}

}  // namespace mh
