// The host's own configuration sections and the component slots a run
// assembles, each slot a TOML section that names its plugin.
#pragma once

#include <megahost/abi.h>

#include <span>
#include <string>
#include <vector>

namespace mh {

struct HostSection {
  const char* name;
  std::span<const MH_OptionSpec> specs;
};

struct SlotSpec {
  const char* section;         // "parallel.tensor"
  int32_t kind;                // MH_Kind
  const char* default_plugin;  // used when the section is absent or has no plugin key; NULL: slot optional
};

std::span<const HostSection> host_sections();
std::span<const SlotSpec> slot_specs();
// Top-level tables a config may have ("model", ..., "parallel").
std::vector<std::string> top_level_sections();

}  // namespace mh
