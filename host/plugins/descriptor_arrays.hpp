// The elements of a plugin descriptor's arrays, read at the stride the plugin
// compiled them with (abi.h, rule 1: MH_PluginDesc's component_size and
// option_size), not at this host's sizeof: a struct that grows in a later
// minor is longer here than in an older plugin.
#pragma once

#include <megahost/abi.h>

#include <cstddef>

namespace mh {

// Element `i` of an array whose elements lie `stride` bytes apart.
template <class T>
const T& element(const T* array, size_t stride, size_t i) {
  return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(array) + i * stride);
}

}  // namespace mh
