// The --list_plugins table: kind, name, version, ABI version and file of
// every component, then each component's options.
#pragma once

#include <string>

#include "plugins/registry.hpp"

namespace mh {
std::string list_plugins(const Registry& registry);
}
