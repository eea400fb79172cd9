#include "cli/plugin_list.hpp"

#include <iomanip>
#include <sstream>

namespace mh {

std::string list_plugins(const Registry& registry) {
  std::ostringstream out;
  out << std::left << std::setw(18) << "KIND" << std::setw(14) << "NAME" << std::setw(9) << "VERSION"
      << std::setw(5) << "ABI" << "FILE\n";
  for (const Component& c : registry.all()) {
    const MH_PluginDesc* p = c.plugin->desc;
    out << std::setw(18) << kind_name(c.desc->kind) << std::setw(14) << c.desc->name << std::setw(9)
        << c.desc->version << std::setw(5) << (std::to_string(p->abi_major) + "." + std::to_string(p->abi_minor))
        << c.plugin->file.string() << "\n";
    if (c.desc->description != nullptr) out << "    " << c.desc->description << "\n";
    for (size_t i = 0; i < c.desc->num_options; ++i) {
      const MH_OptionSpec& o = c.desc->options[i];
      out << "      " << std::setw(24) << o.name << " = " << std::setw(12)
          << (o.default_value != nullptr ? o.default_value : "(required)") << (o.doc != nullptr ? o.doc : "") << "\n";
    }
  }
  return out.str();
}

}  // namespace mh
