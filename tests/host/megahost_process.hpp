// Runs the built megahost binary as a user would and captures what the user
// sees: exit status, standard output and standard error.
#pragma once

#include <string>
#include <vector>

namespace mh::host::testing {

struct Outcome {
  int status = -1;  // exit status; -1 when killed by a signal
  std::string out, err;
};

// megahost with `args`. MEGAHOST_PLUGIN_PATH is cleared, so the plugins
// searched are --plugin_path's and the built ones.
Outcome run_megahost(const std::vector<std::string>& args);

// The columns (kind, name, version, ABI, file) of the --list_plugins row of
// component `kind` `name`; empty when it is not listed.
std::vector<std::string> listed(const std::string& listing, const std::string& kind, const std::string& name);

// "major.minor" of the plugin ABI this build speaks (abi.h).
std::string abi_version();

// The folder a fixture plugin is built into (tests/fixtures/CMakeLists.txt).
std::string fixture(const std::string& folder);

// Overrides that shrink the run to a model that trains in milliseconds on
// the shipped corpus.
std::vector<std::string> tiny_run();

}  // namespace mh::host::testing
