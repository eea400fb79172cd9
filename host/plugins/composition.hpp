// The host's side of plugin composition (ABI 1.5): MH_HostApi's
// find_component and create_component answer from the registry the host
// itself assembles runs from, so a wrapper gets the very component a TOML
// section naming it would get.
#pragma once

#include <megahost/abi.h>

#include "plugins/registry.hpp"

namespace mh {

// Makes `registry` the one MH_HostApi's composition calls use, until it is
// destroyed (Registry does this itself: the last one constructed serves).
void serve_composition(const Registry* registry);
void stop_serving_composition(const Registry* registry);

MH_Error* host_find_component(int32_t kind, const char* name, const MH_ComponentDesc** out);
MH_Error* host_create_component(int32_t kind, const char* name, const MH_CreateArgs* args,
                                const MH_ComponentDesc** component, MH_Instance** out);

}  // namespace mh
