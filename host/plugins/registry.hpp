// Every component the loaded plugins provide, by kind and name.
#pragma once

#include <megahost/abi.h>

#include <deque>
#include <map>
#include <string>
#include <vector>

#include "config/diagnostics.hpp"
#include "plugins/plugin_loader.hpp"

namespace mh {

struct Component {
  const MH_ComponentDesc* desc;
  const LoadedPlugin* plugin;
};

const char* kind_name(int32_t kind);

class Registry {
 public:
  // Registers the components of `plugins`, which must outlive the registry.
  // When two claim the same kind and name, the first on the plugin path
  // wins and a warning names both files.
  // It answers the plugins' MH_HostApi::find_component and create_component
  // (plugins/composition.hpp) from construction to destruction.
  Registry(const std::vector<LoadedPlugin>& plugins, Diagnostics& diag);
  ~Registry();
  Registry(const Registry&) = delete;
  Registry& operator=(const Registry&) = delete;

  const Component* find(int32_t kind, const std::string& name) const;
  std::vector<std::string> names(int32_t kind) const;
  std::vector<Component> all() const;

 private:
  void add(const MH_ComponentDesc& theirs, const LoadedPlugin& plugin, Diagnostics& diag);

  // Each component and its option specs read into this host's struct
  // layout, so nothing past a plugin's struct_size is ever read (deque:
  // Component::desc points into it).
  std::deque<MH_ComponentDesc> descs_;
  std::deque<std::vector<MH_OptionSpec>> options_;
  // Each component's function table likewise: the entries past its
  // struct_size read NULL, so "absent" is one test everywhere (abi.h 1.5).
  std::deque<std::vector<uint64_t>> tables_;
  std::map<std::pair<int32_t, std::string>, Component> components_;
};

}  // namespace mh
