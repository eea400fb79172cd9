#include "plugins/assembly.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <sstream>

#include "config/schema.hpp"

namespace mh {
namespace {

void check_top_level(const Config& config, Diagnostics& diag) {
  std::vector<std::string> known = top_level_sections();
  for (const auto& [key, node] : config.root()) {
    if (std::find(known.begin(), known.end(), key.str()) != known.end()) {
      if (!node.is_table()) diag.error(config.where(node), "'" + std::string(key.str()) + "' must be a section");
      continue;
    }
    std::string hint = did_you_mean(key.str(), known);
    diag.error(config.where(node), "unknown section '" + std::string(key.str()) + "'" + (hint.empty() ? "" : "; " + hint));
  }
  const toml::table* parallel = find_table(config.root(), "parallel");
  if (parallel == nullptr) return;
  std::vector<std::string> subsections;
  for (const auto& s : slot_specs()) {
    std::string name(s.section);
    if (name.rfind("parallel.", 0) == 0) subsections.push_back(name.substr(9));
  }
  for (const auto& [key, node] : *parallel) {
    if (std::find(subsections.begin(), subsections.end(), key.str()) != subsections.end()) {
      // `[parallel] tensor = 2` would otherwise leave parallel.tensor unread.
      if (!node.is_table())
        diag.error(config.where(node), "'parallel." + std::string(key.str()) + "' must be a section, e.g. [parallel." +
                                           std::string(key.str()) + "] size = ...");
      continue;
    }
    std::string hint = did_you_mean(key.str(), subsections);
    diag.error(config.where(node), "unknown section 'parallel." + std::string(key.str()) + "'" + (hint.empty() ? "" : "; " + hint));
  }
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& i : items) out += (out.empty() ? "" : ", ") + i;
  return out.empty() ? "(none)" : out;
}

// The component a wrapper's MH_OPTION_INNER option names (same kind, found
// as a section's plugin is), or NULL with the error reported.
const Component* find_inner(const Config& config, const Registry& registry, const toml::table* section,
                            const SlotSpec& spec, const MH_OptionSpec& option, Diagnostics& diag) {
  const toml::node* node = section != nullptr ? section->get(option.name) : nullptr;
  std::string name;
  if (node != nullptr && node->is_string()) name = *node->value<std::string>();
  else if (node == nullptr && option.default_value != nullptr)
    name = toml::parse(std::string("v = ") + option.default_value)["v"].value_or(std::string());
  const std::string key = std::string(spec.section) + "." + option.name;
  const std::string where = node != nullptr ? config.where(*node) : config.where(section);
  if (name.empty()) {
    diag.error(where, "'" + key + "' must name the " + kind_name(spec.kind) + " component to wrap");
    return nullptr;
  }
  const Component* inner = registry.find(spec.kind, name);
  if (inner == nullptr) {
    std::vector<std::string> available = registry.names(spec.kind);
    std::string hint = did_you_mean(name, available);
    diag.error(where, "'" + key + "': no " + std::string(kind_name(spec.kind)) + " plugin named '" + name +
                          "'; available: " + join(available) + (hint.empty() ? "" : "; " + hint));
    return nullptr;
  }
  if (inner_option(*inner->desc) != nullptr) {
    diag.error(where, "'" + key + "' names '" + name + "', itself a wrapper; wrap a component that is not one");
    return nullptr;
  }
  return inner;
}

std::optional<Slot> assemble_slot(const Config& config, const Registry& registry, const SlotSpec& spec,
                                  Diagnostics& diag) {
  const toml::table* section = find_table(config.root(), spec.section);
  if (section == nullptr && spec.default_plugin == nullptr) return std::nullopt;
  std::string name = spec.default_plugin != nullptr ? spec.default_plugin : "";
  std::string where = config.where(section);
  if (const toml::node* plugin = section != nullptr ? section->get("plugin") : nullptr) {
    where = config.where(*plugin);
    if (!plugin->is_string()) {
      diag.error(where, "'" + std::string(spec.section) + ".plugin' must be a string");
      return std::nullopt;
    }
    name = *plugin->value<std::string>();
  } else if (name.empty()) {
    diag.error(where, "section '" + std::string(spec.section) + "' needs a 'plugin' key");
    return std::nullopt;
  }
  const Component* component = registry.find(spec.kind, name);
  if (component == nullptr) {
    std::vector<std::string> available = registry.names(spec.kind);
    std::string hint = did_you_mean(name, available);
    diag.error(where, "no " + std::string(kind_name(spec.kind)) + " plugin named '" + name + "'; available: " +
                          join(available) + (hint.empty() ? "" : "; " + hint) +
                          " (add its folder with --plugin_path or MEGAHOST_PLUGIN_PATH)");
    return std::nullopt;
  }
  const MH_ComponentDesc* d = component->desc;
  const std::span<const MH_OptionSpec> specs(d->options, d->num_options);
  const MH_OptionSpec* inner_spec = inner_option(*d);
  if (inner_spec == nullptr)
    return Slot{spec.section, spec.kind, component,
                validate_section(config, section, spec.section, specs, {"plugin"}, diag), nullptr, {}};
  const Component* inner = find_inner(config, registry, section, spec, *inner_spec, diag);
  if (inner == nullptr) return std::nullopt;
  const std::span<const MH_OptionSpec> inner_specs(inner->desc->options, inner->desc->num_options);
  std::vector<std::string> own_keys{"plugin"}, inner_keys{"plugin"};
  for (const auto& o : specs) inner_keys.emplace_back(o.name);
  for (const auto& o : inner_specs) {
    own_keys.emplace_back(o.name);
    if (std::find(inner_keys.begin(), inner_keys.end(), o.name) != inner_keys.end())
      diag.error(where, std::string(spec.section) + ": '" + o.name + "' is an option of both '" + d->name + "' and '" +
                            inner->desc->name + "', which it wraps; the section cannot tell them apart");
  }
  return Slot{spec.section, spec.kind, component, validate_section(config, section, spec.section, specs, own_keys, diag),
              inner, validate_section(config, section, spec.section, inner_specs, inner_keys, diag)};
}

std::string value_text(const MH_NamedValue& v) {
  std::ostringstream out;
  switch (v.type) {
    case MH_VALUE_BOOL: out << (v.value.b ? "true" : "false"); break;
    case MH_VALUE_INT: out << v.value.i; break;
    case MH_VALUE_DOUBLE: out << v.value.d; break;
    default: out << '"' << v.value.s << '"'; break;
  }
  return out.str();
}

}  // namespace

std::optional<Assembly> assemble(const Config& config, const Registry& registry, Diagnostics& diag) {
  check_top_level(config, diag);
  Assembly a;
  OptionValues* host[] = {&a.model, &a.train, &a.data, &a.output, &a.checkpoint, &a.generate, &a.serve, &a.peft};
  a.serves = find_table(config.root(), "serve") != nullptr;
  a.generates = a.serves || find_table(config.root(), "generate") != nullptr;
  size_t i = 0;
  for (const auto& s : host_sections())
    *host[i++] = validate_section(config, find_table(config.root(), s.name), s.name, s.specs, {}, diag);
  for (const auto& spec : slot_specs())
    if (auto slot = assemble_slot(config, registry, spec, diag)) a.slots.push_back(std::move(*slot));
  if (diag.has_errors()) return std::nullopt;
  return a;
}

std::optional<Slot> assemble_slot(const Config& config, const Registry& registry, int32_t kind, Diagnostics& diag) {
  for (const auto& spec : slot_specs())
    if (spec.kind == kind) return assemble_slot(config, registry, spec, diag);
  return std::nullopt;
}

const Slot* Assembly::slot(int32_t kind) const {
  for (const auto& s : slots)
    if (s.kind == kind) return &s;
  return nullptr;
}

std::string Assembly::describe() const {
  std::ostringstream out;
  for (const auto& s : slots) {
    const MH_ComponentDesc* d = s.component->desc;
    out << "  [" << s.section << "] " << d->name << " " << d->version << " from "
        << s.component->plugin->file.filename().string();
    const MH_Options* o = s.options.view();
    for (size_t i = 0; i < o->count; ++i) out << (i == 0 ? ": " : ", ") << o->values[i].name << "=" << value_text(o->values[i]);
    if (s.inner != nullptr) {
      out << "; wrapping " << s.inner->desc->name << " " << s.inner->desc->version << " from "
          << s.inner->plugin->file.filename().string();
      const MH_Options* io = s.inner_options.view();
      for (size_t i = 0; i < io->count; ++i)
        out << (i == 0 ? ": " : ", ") << io->values[i].name << "=" << value_text(io->values[i]);
    }
    out << "\n";
  }
  return out.str();
}

const MH_OptionSpec* inner_option(const MH_ComponentDesc& c) {
  for (size_t i = 0; i < c.num_options; ++i)
    if (c.options[i].type == MH_VALUE_STRING && (c.options[i].flags & MH_OPTION_INNER) != 0) return &c.options[i];
  return nullptr;
}

Instance::Instance(const Slot& slot, int32_t ranks_in_process, int32_t rank) : slot_(&slot) {
  MH_CreateArgs args{sizeof(MH_CreateArgs), slot.options.view(), ranks_in_process, rank,
                     slot.inner != nullptr ? slot.inner_options.view() : nullptr};
  check(slot.component->desc->create(&args, &raw_),
        label() + " from " + slot.component->plugin->file.string() + " failed to start");
}

Instance::~Instance() { slot_->component->desc->destroy(raw_); }

std::string Instance::label() const {
  return slot_->section + " '" + slot_->component->desc->name + "'";
}

}  // namespace mh
