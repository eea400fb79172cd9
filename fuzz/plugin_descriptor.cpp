// Descriptor fuzzing: what a plugin's entry point returns, built from the
// input bytes as a garbage-returning plugin would build it, then given to
// the host's validation (descriptor_problem) and, when accepted, used the way
// the host uses a loaded plugin's descriptor. The same bytes are also handed
// over as a plugin built for ABI 1.x would return them (1.x's descriptors
// are 2.0's without the fields 2.0 appended), through the 1.x adapter.
//
// Input layout, read front to back (missing bytes read as 0):
//   plugin:    struct_size u8, abi_major u8, abi_minor u8, name S, version S,
//              components u8 (count = low 3 bits; bit 7: NULL list), components
//   component: struct_size u8, kind i8, name S, version S, description S,
//              u8 bits (1 create, 2 destroy, 4 api non-NULL),
//              [api present: its struct_size / 8 u8],
//              options u8 (count = low 3 bits; bit 7: NULL list), options
//   option:    struct_size u8, name S, type i8, flags u8, default S,
//              min i8, max i8, choices S, doc S
//   S:         length u8 then that many bytes; length 255 is a NULL string
// Every struct, array and string is its own heap block of exactly the size
// the plugin declares (the last element of an array ends where its
// struct_size says), so AddressSanitizer reports any read past what the
// plugin said it filled in.
#include <algorithm>
#include <cstring>
#include <memory>
#include <type_traits>
#include <vector>

#include <megahost/error.hpp>

#include "plugins/abi1_adapter.hpp"
#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "cli/plugin_list.hpp"
#include "plugins/plugin_loader.hpp"
#include "plugins/registry.hpp"
#include "targets.hpp"

namespace mh::fuzz {
namespace {

constexpr uint8_t kNullString = 255;

MH_Error* create_nothing(const MH_CreateArgs*, MH_Instance** out) {
  *out = nullptr;
  return nullptr;
}
void destroy_nothing(MH_Instance*) {}

// Owns every block the fake plugin hands out.
class FakePlugin {
 public:
  explicit FakePlugin(Input input) : in_(input) {}

  const MH_PluginDesc* descriptor() {
    MH_PluginDesc d{};
    d.struct_size = u8();
    d.abi_major = u8();
    d.abi_minor = u8();
    d.name = string();
    d.version = string();
    d.component_size = sizeof(MH_ComponentDesc);
    d.option_size = sizeof(MH_OptionSpec);
    // Each stride counts as declared only where struct_size reaches it, as the host reads them.
    declares_component_size_ = d.struct_size >= MH_STRUCT_SIZE(MH_PluginDesc, component_size);
    declares_option_size_ = d.struct_size >= MH_STRUCT_SIZE(MH_PluginDesc, option_size);
    std::tie(d.components, d.num_components) = array<MH_ComponentDesc>(&FakePlugin::component);
    return place(&d, 1, sizeof d);
  }

 private:
  MH_ComponentDesc component() {
    MH_ComponentDesc c{};
    c.struct_size = u8();
    c.kind = int8_t(u8());
    c.name = string();
    c.version = string();
    c.description = string();
    uint8_t present = u8();
    c.create = (present & 1) ? &create_nothing : nullptr;
    c.destroy = (present & 2) ? &destroy_nothing : nullptr;
    c.api = (present & 4) ? table() : nullptr;
    std::tie(c.options, c.num_options) = array<MH_OptionSpec>(&FakePlugin::option);
    return c;
  }

  MH_OptionSpec option() {
    MH_OptionSpec o{};
    o.struct_size = u8();
    o.name = string();
    o.type = int8_t(u8());
    o.flags = u8();
    o.default_value = string();
    o.min = int8_t(u8());
    o.max = int8_t(u8());
    o.choices = string();
    o.doc = string();
    return o;
  }

  // A list of up to 7 elements, or NULL, with its declared count, laid out
  // as the plugin would compile it: sizeof apart when the descriptor
  // declares that array's stride, else, as a plugin built for ABI 1.0 or 1.1
  // (the 1.x adapter reads those), the first element's struct_size rounded
  // up to size_t's alignment. (2.0 refuses a descriptor that declares no
  // strides before reading its arrays.)
  template <class T>
  std::pair<const T*, size_t> array(T (FakePlugin::*element)()) {
    uint8_t header = u8();
    std::vector<T> items(header & 7);
    for (T& item : items) item = (this->*element)();
    if ((header & 0x80) || items.empty()) return {nullptr, items.size()};
    const bool declared = std::is_same_v<T, MH_ComponentDesc> ? declares_component_size_ : declares_option_size_;
    const size_t align = sizeof(size_t);
    const size_t stride = declared ? sizeof(T) : (std::max(items[0].struct_size, align) + align - 1) / align * align;
    return {place(items.data(), items.size(), stride), items.size()};
  }

  // Copies `items` into one block, `stride` bytes apart, each cut to what
  // the stride holds, the last ending where its struct_size says (it always
  // holds that struct_size field itself).
  template <class T>
  const T* place(const T* items, size_t count, size_t stride) {
    size_t last = std::clamp<size_t>(items[count - 1].struct_size, sizeof(size_t), sizeof(T));
    std::vector<unsigned char> bytes((count - 1) * stride + last, 0);
    for (size_t i = 0; i < count; ++i)
      std::memcpy(bytes.data() + i * stride, &items[i], std::min({stride, sizeof(T), bytes.size() - i * stride}));
    return static_cast<const T*>(keep(bytes.data(), bytes.size()));
  }

  // A function table the host only measures: struct_size and zeros (NULL
  // functions) up to it.
  const void* table() {
    size_t struct_size = size_t(u8()) * 8;
    std::vector<unsigned char> bytes(std::max(struct_size, sizeof(size_t)), 0);
    std::memcpy(bytes.data(), &struct_size, sizeof struct_size);
    return keep(bytes.data(), bytes.size());
  }

  const char* string() {
    uint8_t length = u8();
    if (length == kNullString) return nullptr;
    std::vector<char> text(length + 1, '\0');
    for (char& c : std::span(text).first(length)) c = char(u8());
    return static_cast<const char*>(keep(text.data(), text.size()));
  }

  const void* keep(const void* bytes, size_t size) {
    blocks_.push_back(std::make_unique<unsigned char[]>(size));
    std::memcpy(blocks_.back().get(), bytes, size);
    return blocks_.back().get();
  }

  uint8_t u8() { return at_ < in_.size() ? in_[at_++] : 0; }

  Input in_;
  size_t at_ = 0;
  bool declares_component_size_ = false, declares_option_size_ = false;
  std::vector<std::unique_ptr<unsigned char[]>> blocks_;
};

const Config& embedded_default_config() {
  static Diagnostics ignored;
  static const Config config = *Config::load("", {}, ignored);
  return config;
}

// What the host does with an accepted descriptor: register its components,
// list them, and assemble each with every option at its default.
void use_accepted(const MH_PluginDesc* desc) {
  std::vector<LoadedPlugin> plugins(1);
  plugins[0].file = "fake_plugin.so";
  plugins[0].desc = desc;
  Diagnostics diag;
  Registry registry(plugins, diag);
  list_plugins(registry);
  Assembly assembly;
  for (const Component& listed : registry.all()) {
    const Component* c = registry.find(listed.desc->kind, listed.desc->name);
    std::span<const MH_OptionSpec> specs(c->desc->options, c->desc->num_options);
    std::string section = kind_name(c->desc->kind);
    assembly.slots.push_back(Slot{section, c->desc->kind, c,
                                  validate_section(embedded_default_config(), nullptr, section, specs, {"plugin"}, diag)});
  }
  assembly.describe();
}

// The answer of the fake 1.x entry point below.
const abi1::V1PluginDesc* v1_descriptor = nullptr;

MH_Error* v1_entry(const abi1::V1HostApi*, const abi1::V1PluginDesc** out) {
  *out = v1_descriptor;
  return nullptr;
}

void use_as_v1(const MH_PluginDesc* desc) {
  v1_descriptor = reinterpret_cast<const abi1::V1PluginDesc*>(desc);
  try {
    use_accepted(abi1::adapt_plugin(&v1_entry));
  } catch (const Error&) {
    // Refused, with the reason the loader would print.
  }
}

}  // namespace

void plugin_descriptor(Input input) {
  FakePlugin plugin(input);
  const MH_PluginDesc* desc = plugin.descriptor();
  if (descriptor_problem(desc).empty()) use_accepted(desc);
  use_as_v1(desc);
}

}  // namespace mh::fuzz
