// The elements of a plugin descriptor's arrays, read at the stride the plugin
// compiled them with (abi.h, rule 1), not at this host's sizeof: a struct
// that grew in a later minor is longer here than in an older plugin.
#pragma once

#include <megahost/abi.h>
#include <megahost/struct_size.hpp>

#include <cstddef>

namespace mh {

// The distance between the descriptor's components (num_components > 0).
inline size_t component_stride(const MH_PluginDesc& d) {
  if (reaches(d, &MH_PluginDesc::component_size)) return d.component_size;
  return MH_ARRAY_STRIDE(d.components[0].struct_size);
}

// The distance between the options of component `c` of `d` (num_options > 0).
inline size_t option_stride(const MH_PluginDesc& d, const MH_ComponentDesc& c) {
  if (reaches(d, &MH_PluginDesc::option_size)) return d.option_size;
  return MH_ARRAY_STRIDE(c.options[0].struct_size);
}

// Element `i` of an array whose elements lie `stride` bytes apart.
template <class T>
const T& element(const T* array, size_t stride, size_t i) {
  return *reinterpret_cast<const T*>(reinterpret_cast<const char*>(array) + i * stride);
}

}  // namespace mh
