// Plugins built for ABI major 1 keep loading in this 2.0 host for one
// release (docs/sdk.md, "Plugins built for ABI 1.x"): the loader hands a
// library that exports mh_plugin_entry_v1, and not 2.0's entry, to this
// adapter. It calls the 1.x entry with a 1.8 host API, checks the 1.x
// descriptor by the rules a 1.8 host applied (strides before 1.2, tables
// limited by struct_size, NULL or absent entries, capabilities derived for
// tables older than 1.5) and presents each component as a 2.0 one whose
// table converts every call to the 1.x layout.
#pragma once

#include <megahost/abi.h>

#include "plugins/abi1_types.hpp"

namespace mh::abi1 {

// The plugin's descriptor in 2.0's layout; its abi_major and abi_minor are
// the 1.x version it was built for. It lives as long as the process. Throws
// mh::Error saying why the plugin is refused.
const MH_PluginDesc* adapt_plugin(EntryFn entry);

}  // namespace mh::abi1
