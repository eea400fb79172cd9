// The 1.x adapter's descriptor side: the entry call, the checks of a 1.8
// host, and the 2.0 descriptors whose create wraps each 1.x instance.
#include "plugins/abi1_adapter.hpp"

#include <megahost/error.hpp>

#include <algorithm>
#include <array>
#include <deque>
#include <memory>
#include <mutex>
#include <utility>

#include "config/config.hpp"
#include "plugins/abi1_component.hpp"
#include "plugins/descriptor_checks.hpp"
#include "plugins/plugin_loader.hpp"
#include "plugins/registry.hpp"

namespace mh::abi1 {
namespace {

// ------------------------------------------------------------------------
// The host API a 1.x plugin gets: 1.8's, without composition
// ------------------------------------------------------------------------

// A 1.x wrapper would be handed components in 2.0's layout, which it cannot
// read.
MH_Error* refuse_composition() {
  return make_error(MH_UNIMPLEMENTED,
                    "composition (find_component, create_component) needs a plugin rebuilt for plugin ABI 2: this "
                    "host's components have 2.0 layouts, which a plugin built for ABI 1.x cannot read");
}

MH_Error* refuse_find(int32_t, const char*, const V1ComponentDesc**) { return refuse_composition(); }
MH_Error* refuse_create(int32_t, const char*, const void*, const V1ComponentDesc**, MH_Instance**) {
  return refuse_composition();
}

const V1HostApi* v1_host_api() {
  static const V1HostApi api{sizeof(V1HostApi), kMajor, kMinor, host_api()->log, &refuse_find, &refuse_create};
  return &api;
}

// ------------------------------------------------------------------------
// The checks a 1.8 host made of a 1.x descriptor
// ------------------------------------------------------------------------

// A kind's 1.x table up to the last function a 1.8 host called.
size_t table_size_needed(int32_t kind) {
  switch (kind) {
    case MH_KIND_KERNELS: return MH_STRUCT_SIZE(V1KernelsApi, sum_squares);
    case MH_KIND_COMM: return MH_STRUCT_SIZE(V1CommApi, abort);
    case MH_KIND_PIPELINE_PARALLEL: return MH_STRUCT_SIZE(V1PipelineParallelApi, schedule);
    case MH_KIND_TUNER: return MH_STRUCT_SIZE(V1TunerApi, report);
    default: return 2 * sizeof(void*);  // struct_size and the kind's one call
  }
}

// Before 1.2 a descriptor did not say its arrays' strides: the first
// element's struct_size rounded up to size_t's alignment, which was sizeof
// for every struct released before 1.2.
size_t array_stride(size_t struct_size) { return (struct_size + sizeof(size_t) - 1) / sizeof(size_t) * sizeof(size_t); }

// Each stride counts where the descriptor's struct_size reaches it, as a
// 1.8 host read them.
size_t component_stride(const V1PluginDesc& d) {
  const bool declared = d.struct_size >= MH_STRUCT_SIZE(V1PluginDesc, component_size);
  return declared ? d.component_size : array_stride(d.components[0].struct_size);
}

size_t option_stride(const V1PluginDesc& d, const V1ComponentDesc& c) {
  const bool declared = d.struct_size >= MH_STRUCT_SIZE(V1PluginDesc, option_size);
  return declared ? d.option_size : array_stride(c.options[0].struct_size);
}

std::string component_problem(const V1PluginDesc& d, const V1ComponentDesc& c) {
  if (c.struct_size < MH_STRUCT_SIZE(V1ComponentDesc, api)) return " has a descriptor that is too small";
  if (c.kind < 0 || c.kind >= MH_KIND_COUNT) return " has unknown kind " + std::to_string(c.kind);
  if (c.name == nullptr || c.name[0] == '\0') return " has no name";
  const std::string which = " ('" + std::string(c.name) + "')";
  if (c.create == nullptr || c.destroy == nullptr || c.api == nullptr)
    return which + " lacks create, destroy or its function table";
  if (size_t table = *static_cast<const size_t*>(c.api); table < table_size_needed(c.kind))
    return which + " has a function table of " + std::to_string(table) + " bytes; its kind needs " +
           std::to_string(table_size_needed(c.kind));
  if (int null = first_null_entry(c.api, sizeof(size_t), table_size_needed(c.kind)); null >= 0)
    return which + " has a NULL entry #" + std::to_string(null) + " among those its kind requires (" +
           kind_name(c.kind) + "); only an optional entry, one added in a later minor, may be NULL";
  if (c.num_options == 0) return "";
  if (c.options == nullptr) return which + " has a NULL option list";
  const std::string problem = options_problem(c.options, c.num_options, option_stride(d, c));
  return problem.empty() ? "" : which + problem;
}

std::string descriptor_problem(const V1PluginDesc* d) {
  if (d == nullptr) return "its entry point returned no descriptor";
  if (d->struct_size < MH_STRUCT_SIZE(V1PluginDesc, num_components))
    return "its descriptor is too small (struct_size " + std::to_string(d->struct_size) + ")";
  if (d->abi_major != kMajor)
    return "its entry point mh_plugin_entry_v1 returned a descriptor of ABI " + std::to_string(d->abi_major) + "." +
           std::to_string(d->abi_minor) + "; rebuild it against this host's SDK";
  if (d->name == nullptr || d->version == nullptr) return "its descriptor has no name or version";
  if (d->num_components == 0) return "";
  if (d->components == nullptr) return "its component list is NULL";
  const size_t stride = component_stride(*d);
  if (std::string p =
          stride_problem("component_size", stride, largest_struct_size(d->components, stride, d->num_components));
      !p.empty())
    return p;
  for (size_t i = 0; i < d->num_components; ++i)
    if (std::string problem = component_problem(*d, element(d->components, stride, i)); !problem.empty())
      return "component #" + std::to_string(i) + problem;
  return "";
}

// ------------------------------------------------------------------------
// Instances: create has no argument saying which component it creates, so
// each adapted component gets a create of its own, one of a fixed set of
// slots; every other call finds the component through the instance.
// ------------------------------------------------------------------------

MH_Error* create_instance(const Component& c, const MH_CreateArgs* args, MH_Instance** out) {
  MH_Instance* inner = nullptr;
  // A 1.x create reads 2.0's MH_CreateArgs within its own struct_size: the
  // fields it knew come first, unchanged.
  if (MH_Error* e = c.create(args, &inner)) return e;
  return guard([&] { *out = reinterpret_cast<MH_Instance*>(new Instance{&c, inner, std::nullopt, {}, {}}); });
}

void destroy_instance(MH_Instance* self) {
  if (self == nullptr) return;
  std::unique_ptr<Instance> owned(&instance(self));
  owned->component->destroy(owned->inner);
}

constexpr size_t kSlots = 256;
std::array<const Component*, kSlots> slots{};
size_t slots_used = 0;

template <size_t Slot>
MH_Error* create_in_slot(const MH_CreateArgs* args, MH_Instance** out) {
  return create_instance(*slots[Slot], args, out);
}

template <size_t... Slot>
constexpr auto slot_creates(std::index_sequence<Slot...>) {
  return std::array<MH_Error* (*)(const MH_CreateArgs*, MH_Instance**), kSlots>{&create_in_slot<Slot>...};
}
constexpr auto kSlotCreates = slot_creates(std::make_index_sequence<kSlots>());

// ------------------------------------------------------------------------
// The adapted plugin
// ------------------------------------------------------------------------

struct Adapted {
  MH_PluginDesc desc{};
  std::vector<MH_ComponentDesc> components;
  std::deque<Component> adapted;
  std::deque<std::vector<MH_OptionSpec>> options;
};

// Plugins are never unloaded (abi.h rule 5), so neither is what adapts them.
std::mutex adapted_mutex;
std::deque<Adapted> all_adapted;

// The 1.x table copied whole: the entries past its struct_size read 0.
std::vector<uint64_t> table_copy(const void* api, size_t ours) {
  std::vector<uint64_t> table((ours + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
  std::memcpy(table.data(), api, std::min(*static_cast<const size_t*>(api), ours));
  return table;
}

size_t v1_table_size(int32_t kind) {
  switch (kind) {
    case MH_KIND_KERNELS: return sizeof(V1KernelsApi);
    case MH_KIND_COMM: return sizeof(V1CommApi);
    case MH_KIND_TENSOR_PARALLEL: return sizeof(V1TensorParallelApi);
    case MH_KIND_PIPELINE_PARALLEL: return sizeof(V1PipelineParallelApi);
    case MH_KIND_DATA_PARALLEL: return sizeof(V1DataParallelApi);
    case MH_KIND_RECOMPUTE: return sizeof(V1RecomputeApi);
    case MH_KIND_CONTEXT_PARALLEL: return sizeof(V1ContextParallelApi);
    case MH_KIND_EXPERT_PARALLEL: return sizeof(V1ExpertParallelApi);
    default: return sizeof(V1TunerApi);
  }
}

// Options in 2.0's layout (the same struct): `doc` may lie past an older
// spec's struct_size and then reads NULL.
std::vector<MH_OptionSpec> options_of(const V1PluginDesc& d, const V1ComponentDesc& c) {
  std::vector<MH_OptionSpec> out;
  for (size_t o = 0; o < c.num_options; ++o) {
    const MH_OptionSpec& theirs = element(c.options, option_stride(d, c), o);
    MH_OptionSpec& ours = out.emplace_back();
    std::memcpy(&ours, &theirs, std::min(theirs.struct_size, sizeof(ours)));
    if (theirs.struct_size < MH_STRUCT_SIZE(MH_OptionSpec, doc)) ours.doc = nullptr;
    ours.struct_size = sizeof(ours);
  }
  return out;
}

// The component's 2.0 table and create: trampolines around its 1.x ones. An
// observer's calls have the same layout in both majors and pass through.
void adapt_calls(const V1ComponentDesc& theirs, Adapted& a, MH_ComponentDesc& ours) {
  if (theirs.kind == MH_KIND_OBSERVER) return;
  require(slots_used < kSlots,
          "more than " + std::to_string(kSlots) + " components built for ABI 1.x are loaded; rebuild some for ABI 2",
          MH_RESOURCE_EXHAUSTED);
  Component& c = a.adapted.emplace_back();
  c.kind = theirs.kind;
  c.name = std::string(kind_name(theirs.kind)) + " '" + theirs.name + "'";
  c.create = theirs.create;
  c.destroy = theirs.destroy;
  c.theirs = table_copy(theirs.api, v1_table_size(theirs.kind));
  if (c.kind == MH_KIND_KERNELS)
    fill_kernels(c);
  else if (c.kind == MH_KIND_COMM)
    fill_comm(c);
  else
    fill_planner(c);
  slots[slots_used] = &c;
  ours.create = kSlotCreates[slots_used++];
  ours.destroy = &destroy_instance;
  ours.api = std::visit([](const auto& table) -> const void* { return &table; }, c.ours);
  if (c.kind == MH_KIND_KERNELS) ours.extensions = c.stream.stream != nullptr ? &c.stream.base : nullptr;
}

void adapt_component(const V1PluginDesc& d, const V1ComponentDesc& theirs, Adapted& a) {
  MH_ComponentDesc& ours = a.components.emplace_back();
  ours.struct_size = sizeof(ours);
  ours.kind = theirs.kind;
  ours.name = theirs.name;
  ours.version = theirs.version;
  ours.description = theirs.description;
  ours.options = a.options.emplace_back(options_of(d, theirs)).data();
  ours.num_options = theirs.num_options;
  ours.create = theirs.create;
  ours.destroy = theirs.destroy;
  ours.api = theirs.api;
  adapt_calls(theirs, a, ours);
}

}  // namespace

const MH_PluginDesc* adapt_plugin(EntryFn entry) {
  const V1PluginDesc* desc = nullptr;
  check(entry(v1_host_api(), &desc), "its entry point failed");
  if (std::string problem = descriptor_problem(desc); !problem.empty())
    throw Error(MH_INVALID_ARGUMENT, "refused: " + problem);
  std::lock_guard lock(adapted_mutex);
  Adapted& a = all_adapted.emplace_back();
  a.components.reserve(desc->num_components);
  for (size_t i = 0; i < desc->num_components; ++i)
    adapt_component(*desc, element(desc->components, component_stride(*desc), i), a);
  a.desc = MH_PluginDesc{sizeof(MH_PluginDesc), desc->abi_major,     desc->abi_minor,     desc->name,
                         desc->version,         a.components.data(), a.components.size(), sizeof(MH_ComponentDesc),
                         sizeof(MH_OptionSpec)};
  return &a.desc;
}

}  // namespace mh::abi1
