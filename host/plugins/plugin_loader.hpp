// Finds plugin shared objects on the plugin path and loads them through
// Boost.DLL: resolves the entry point of our ABI major, checks the versions
// and the shape of the descriptor the plugin returns.
#pragma once

#include <megahost/abi.h>

#include <boost/dll/shared_library.hpp>
#include <filesystem>
#include <string>
#include <vector>

#include "config/diagnostics.hpp"

namespace mh {

struct LoadedPlugin {
  std::filesystem::path file;
  boost::dll::shared_library library;  // kept loaded for the life of the process
  const MH_PluginDesc* desc = nullptr;
};

// The folders searched, in order: --plugin_path entries, then
// MEGAHOST_PLUGIN_PATH entries, then the folders installed next to the binary.
// A --plugin_path entry that is not a folder is an error in `diag`.
std::vector<std::filesystem::path> plugin_search_path(const std::string& flag_value, Diagnostics& diag);

// Loads every mh_*.so in `dirs` (sorted by name within a folder); other
// shared objects there are a plugin's own libraries and are left alone.
// Files that are not loadable plugins are reported as errors in `diag`.
std::vector<LoadedPlugin> load_plugins(const std::vector<std::filesystem::path>& dirs,
                                       Diagnostics& diag);

// Checks everything the host will read of the descriptor an entry point
// returned; "" when it is sound, else what is wrong, for "refused: ...".
std::string descriptor_problem(const MH_PluginDesc* desc);

// The host services every plugin receives.
const MH_HostApi* host_api();

}  // namespace mh
