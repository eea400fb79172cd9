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
  OptionValues options = validate_section(config, section, spec.section,
                                          std::span<const MH_OptionSpec>(d->options, d->num_options), {"plugin"}, diag);
  return Slot{spec.section, spec.kind, component, std::move(options)};
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
  OptionValues* host[] = {&a.model, &a.train, &a.data, &a.output, &a.checkpoint, &a.generate, &a.serve};
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
    out << "\n";
  }
  return out.str();
}

Instance::Instance(const Slot& slot, int32_t ranks_in_process, int32_t rank) : slot_(&slot) {
  MH_CreateArgs args{MH_STRUCT_SIZE(MH_CreateArgs, rank), slot.options.view(), ranks_in_process, rank};
  check(slot.component->desc->create(&args, &raw_),
        label() + " from " + slot.component->plugin->file.string() + " failed to start");
}

Instance::~Instance() { slot_->component->desc->destroy(raw_); }

std::string Instance::label() const {
  return slot_->section + " '" + slot_->component->desc->name + "'";
}

}  // namespace mh
