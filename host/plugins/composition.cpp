#include "plugins/composition.hpp"

#include <megahost/error.hpp>
#include <megahost/struct_size.hpp>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <string>

#include "config/config.hpp"

namespace mh {
namespace {

std::atomic<const Registry*> serving{nullptr};

const Component& resolve(int32_t kind, const char* name) {
  const Registry* registry = serving.load();
  require(registry != nullptr, "the host has no plugin registry yet (find_component called from an entry point?)",
          MH_UNAVAILABLE);
  require(kind >= 0 && kind < MH_KIND_COUNT, "unknown component kind " + std::to_string(kind), MH_INVALID_ARGUMENT);
  require(name != nullptr, "component name is NULL", MH_INVALID_ARGUMENT);
  const Component* c = registry->find(kind, name);
  if (c == nullptr) {
    std::string available;
    for (const auto& n : registry->names(kind)) available += (available.empty() ? "" : ", ") + n;
    throw Error(MH_NOT_FOUND, std::string("no ") + kind_name(kind) + " plugin named '" + name + "'; available: " +
                                  (available.empty() ? "(none)" : available) +
                                  " (add its folder with --plugin_path or MEGAHOST_PLUGIN_PATH)");
  }
  return *c;
}

// The caller's values as a TOML table, so they are checked by the very code
// that checks a config section.
toml::table as_table(const MH_Options& given) {
  toml::table t;
  for (size_t i = 0; i < given.count; ++i) {
    const MH_NamedValue& v = given.values[i];
    require(v.name != nullptr, "option #" + std::to_string(i) + " has no name", MH_INVALID_ARGUMENT);
    switch (v.type) {
      case MH_VALUE_BOOL: t.insert_or_assign(v.name, v.value.b != 0); break;
      case MH_VALUE_INT: t.insert_or_assign(v.name, v.value.i); break;
      case MH_VALUE_DOUBLE: t.insert_or_assign(v.name, v.value.d); break;
      case MH_VALUE_STRING:
        require(v.value.s != nullptr, std::string("option '") + v.name + "' is a NULL string", MH_INVALID_ARGUMENT);
        t.insert_or_assign(v.name, std::string(v.value.s));
        break;
      default: throw Error(MH_INVALID_ARGUMENT, std::string("option '") + v.name + "' has unknown type");
    }
  }
  return t;
}

// The forwarded options checked against `c`'s specs, defaults filled in;
// MH_INVALID_ARGUMENT listing every problem.
OptionValues checked_options(const Component& c, const MH_Options* given) {
  const MH_Options none{sizeof(MH_Options), nullptr, 0, nullptr};
  const MH_Options& g = given != nullptr ? *given : none;
  const std::string section = g.section != nullptr && g.section[0] != '\0' ? g.section : kind_name(c.desc->kind);
  const toml::table table = as_table(g);
  Diagnostics diag;
  const std::string who = "options forwarded to " + std::string(kind_name(c.desc->kind)) + " '" + c.desc->name + "'";
  OptionValues values = validate_table([&](const toml::node*) { return who; }, &table, section,
                                       std::span<const MH_OptionSpec>(c.desc->options, c.desc->num_options), {}, diag);
  require(!diag.has_errors(), diag.report(), MH_INVALID_ARGUMENT);
  return values;
}

}  // namespace

void serve_composition(const Registry* registry) { serving.store(registry); }

void stop_serving_composition(const Registry* registry) {
  const Registry* expected = registry;
  serving.compare_exchange_strong(expected, nullptr);
}

MH_Error* host_find_component(int32_t kind, const char* name, const MH_ComponentDesc** out) {
  return guard([&] { *out = resolve(kind, name).desc; });
}

MH_Error* host_create_component(int32_t kind, const char* name, const MH_CreateArgs* args,
                                const MH_ComponentDesc** component, MH_Instance** out) {
  return guard([&] {
    require(args != nullptr && component != nullptr && out != nullptr, "create_component: NULL argument",
            MH_INVALID_ARGUMENT);
    const Component& c = resolve(kind, name);
    const OptionValues options = checked_options(c, args->options);
    // The created component reads the arguments of this host's minor; the
    // caller's, from an older SDK, may stop earlier.
    MH_CreateArgs mine{};
    std::memcpy(&mine, args, std::min(args->struct_size, sizeof(mine)));
    mine.struct_size = sizeof(mine);
    mine.options = options.view();
    mine.inner_options = nullptr;
    check(c.desc->create(&mine, out), std::string(kind_name(kind)) + " '" + name + "' from " +
                                          c.plugin->file.string() + " failed to start");
    *component = c.desc;
  });
}

}  // namespace mh
