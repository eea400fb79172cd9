// Config fuzzing: the run's TOML and the command-line overrides, each through
// Config::load and assemble as main() runs them.
#include <string>
#include <vector>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "fixed_registry.hpp"
#include "scratch.hpp"
#include "targets.hpp"

namespace mh::fuzz {
namespace {

void load_and_assemble(const std::string& path, const std::vector<std::string>& overrides) {
  Diagnostics diag;
  std::optional<Config> config = Config::load(path, overrides, diag);
  if (config) assemble(*config, fixed_registry(), diag);
  diag.report();
}

std::vector<std::string> lines(std::string_view text) {
  std::vector<std::string> out;
  for (size_t start = 0; start <= text.size();) {
    size_t end = std::min(text.find('\n', start), text.size());
    out.emplace_back(text.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

void config(Input input) { load_and_assemble(scratch_file("run.toml", as_text(input)), {}); }

void overrides(Input input) { load_and_assemble("", lines(as_text(input))); }

}  // namespace mh::fuzz
