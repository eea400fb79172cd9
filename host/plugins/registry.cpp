#include "plugins/registry.hpp"

#include <algorithm>
#include <cstring>

#include "plugins/composition.hpp"
#include "plugins/descriptor_arrays.hpp"

namespace mh {
namespace {

// A copy of a plugin's struct in this host's layout: the bytes its
// struct_size covers, zero (NULL) for fields its minor did not have.
template <class T>
T in_host_layout(const T* theirs) {
  T ours{};
  std::memcpy(&ours, theirs, std::min(theirs->struct_size, sizeof(T)));
  return ours;
}

// An option spec in this host's layout. `doc` is the one field that may lie
// past its struct_size (the loader refuses shorter specs); a struct_size that
// ends inside it leaves it NULL, not half a pointer.
MH_OptionSpec option_in_host_layout(const MH_OptionSpec* theirs) {
  MH_OptionSpec ours = in_host_layout(theirs);
  if (theirs->struct_size < MH_STRUCT_SIZE(MH_OptionSpec, doc)) ours.doc = nullptr;
  return ours;
}

// sizeof this host's function table of `kind`.
size_t table_size(int32_t kind) {
  switch (kind) {
    case MH_KIND_KERNELS: return sizeof(MH_KernelsApi);
    case MH_KIND_COMM: return sizeof(MH_CommApi);
    case MH_KIND_TENSOR_PARALLEL: return sizeof(MH_TensorParallelApi);
    case MH_KIND_PIPELINE_PARALLEL: return sizeof(MH_PipelineParallelApi);
    case MH_KIND_DATA_PARALLEL: return sizeof(MH_DataParallelApi);
    case MH_KIND_RECOMPUTE: return sizeof(MH_RecomputeApi);
    case MH_KIND_OBSERVER: return sizeof(MH_ObserverApi);
    case MH_KIND_CONTEXT_PARALLEL: return sizeof(MH_ContextParallelApi);
    case MH_KIND_EXPERT_PARALLEL: return sizeof(MH_ExpertParallelApi);
    default: return sizeof(MH_TunerApi);
  }
}

}  // namespace

const char* kind_name(int32_t kind) {
  switch (kind) {
    case MH_KIND_KERNELS: return "kernels";
    case MH_KIND_COMM: return "comm";
    case MH_KIND_TENSOR_PARALLEL: return "parallel.tensor";
    case MH_KIND_PIPELINE_PARALLEL: return "parallel.pipeline";
    case MH_KIND_DATA_PARALLEL: return "parallel.data";
    case MH_KIND_RECOMPUTE: return "recompute";
    case MH_KIND_TUNER: return "tuner";
    case MH_KIND_OBSERVER: return "observer";
    case MH_KIND_CONTEXT_PARALLEL: return "parallel.context";
    case MH_KIND_EXPERT_PARALLEL: return "parallel.expert";
    default: return "unknown";
  }
}

Registry::Registry(const std::vector<LoadedPlugin>& plugins, Diagnostics& diag) {
  for (const auto& plugin : plugins)
    for (size_t i = 0; i < plugin.desc->num_components; ++i)
      add(element(plugin.desc->components, plugin.desc->component_size, i), plugin, diag);
  serve_composition(this);
}

Registry::~Registry() { stop_serving_composition(this); }

void Registry::add(const MH_ComponentDesc& theirs, const LoadedPlugin& plugin, Diagnostics& diag) {
  MH_ComponentDesc& c = descs_.emplace_back(in_host_layout(&theirs));
  std::vector<MH_OptionSpec>& specs = options_.emplace_back();
  for (size_t o = 0; o < c.num_options; ++o)
    specs.push_back(option_in_host_layout(&element(c.options, plugin.desc->option_size, o)));
  c.options = specs.data();
  const size_t theirs_size = *static_cast<const size_t*>(c.api), ours_size = table_size(c.kind);
  std::vector<uint64_t>& table = tables_.emplace_back((ours_size + sizeof(uint64_t) - 1) / sizeof(uint64_t), 0);
  std::memcpy(table.data(), c.api, std::min(theirs_size, ours_size));
  c.api = table.data();
  auto [it, inserted] = components_.try_emplace({c.kind, c.name}, Component{&c, &plugin});
  if (!inserted)
    diag.warning(plugin.file.string(),
                 std::string(kind_name(c.kind)) + " component '" + c.name + "' is also provided by " +
                     it->second.plugin->file.string() + ", which comes first on the plugin path and is used");
}

const Component* Registry::find(int32_t kind, const std::string& name) const {
  auto it = components_.find({kind, name});
  return it == components_.end() ? nullptr : &it->second;
}

std::vector<std::string> Registry::names(int32_t kind) const {
  std::vector<std::string> out;
  for (const auto& [key, component] : components_)
    if (key.first == kind) out.push_back(key.second);
  return out;
}

std::vector<Component> Registry::all() const {
  std::vector<Component> out;
  for (const auto& [key, component] : components_) out.push_back(component);
  return out;
}

}  // namespace mh
