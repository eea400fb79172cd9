// Turns a validated config and the plugin registry into the run's pipeline:
// the host's sections and one slot per component kind, each with its chosen
// component and validated options. Every problem is reported at once and no
// partial pipeline is returned.
#pragma once

#include <megahost/abi.h>

#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plugins/registry.hpp"

namespace mh {

struct Slot {
  std::string section;
  int32_t kind;
  const Component* component;
  OptionValues options;
  // A wrapper's (ABI 1.5, MH_OPTION_INNER): the component it wraps and the
  // section's keys validated against that component's options.
  const Component* inner = nullptr;
  OptionValues inner_options;
};

struct Assembly {
  OptionValues model, train, data, output, checkpoint, generate, serve, peft;
  // The TOML has [generate] or [serve]: the run generates text instead of
  // training, from a prompts file or, with [serve], for HTTP clients.
  bool generates = false;
  bool serves = false;  // the TOML has [serve]
  std::vector<Slot> slots;

  // The slot of `kind`, or NULL when the run has none (the tuner).
  const Slot* slot(int32_t kind) const;
  // One line per slot: section, component, plugin file, options.
  std::string describe() const;
};

std::optional<Assembly> assemble(const Config& config, const Registry& registry, Diagnostics& diag);
// The slot of component kind `kind` alone, as assemble builds it.
std::optional<Slot> assemble_slot(const Config& config, const Registry& registry, int32_t kind, Diagnostics& diag);

// The option of `c` flagged MH_OPTION_INNER, or NULL.
const MH_OptionSpec* inner_option(const MH_ComponentDesc& c);

// An instance of a slot's component, destroyed through its own table.
class Instance {
 public:
  Instance(const Slot& slot, int32_t ranks_in_process, int32_t rank);
  ~Instance();
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  MH_Instance* get() const { return raw_; }
  template <class Api>
  const Api* api() const {
    return static_cast<const Api*>(slot_->component->desc->api);
  }
  const Component& component() const { return *slot_->component; }
  // "parallel.tensor 'megatron'", for messages.
  std::string label() const;

 private:
  const Slot* slot_;
  MH_Instance* raw_ = nullptr;
};

}  // namespace mh
