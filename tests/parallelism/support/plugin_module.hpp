// Loads a built plugin module the way the host does (RTLD_NOW | RTLD_LOCAL,
// the one entry symbol, never unloaded) and summarises what it declares.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>

#include <dlfcn.h>

#include <stdexcept>
#include <string>

namespace mh::testing {

// "(ABI 1.N)" for the header every in-tree plugin is built against.
inline const std::string kBuiltAbi =
    "(ABI " + std::to_string(MH_ABI_MAJOR) + "." + std::to_string(MH_ABI_MINOR) + ")";

// "parallel_tensor 1.0.0 (ABI 1.2): tensor_parallel megatron [size, sequence_parallel]",
// one "; kind name [options]" per component.
inline std::string describe_module(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw std::runtime_error(dlerror());
  auto entry = reinterpret_cast<MH_EntryFn>(dlsym(library, MH_ENTRY_SYMBOL));
  if (entry == nullptr) throw std::runtime_error(std::string(path) + " has no " + MH_ENTRY_SYMBOL);
  static const MH_HostApi host{MH_STRUCT_SIZE(MH_HostApi, log), MH_ABI_MAJOR, MH_ABI_MINOR,
                               [](int32_t, const char*, const char*) {}};
  const MH_PluginDesc* plugin = nullptr;
  check(entry(&host, &plugin), path);

  static const char* const kinds[MH_KIND_COUNT] = {
      "kernels",   "comm", "tensor_parallel", "pipeline_parallel", "data_parallel",
      "recompute", "tuner", "observer", "context_parallel", "expert_parallel"};
  std::string out = std::string(plugin->name) + " " + plugin->version + " (ABI " +
                    std::to_string(plugin->abi_major) + "." + std::to_string(plugin->abi_minor) +
                    "):";
  for (size_t c = 0; c < plugin->num_components; ++c) {
    const MH_ComponentDesc& d = plugin->components[c];
    out += std::string(c == 0 ? " " : "; ") + kinds[d.kind] + " " + d.name + " [";
    for (size_t o = 0; o < d.num_options; ++o) {
      if (o > 0) out += ", ";
      out += d.options[o].name;
    }
    out += "]";
  }
  return out;
}

}  // namespace mh::testing
