#include "plugins/plugin_loader.hpp"

#include <dlfcn.h>
#include <glog/logging.h>

#include <algorithm>
#include <boost/dll/runtime_symbol_info.hpp>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include <megahost/error.hpp>

#include "config/config.hpp"
#include "plugins/abi1_adapter.hpp"
#include "plugins/composition.hpp"
#include "plugins/descriptor_checks.hpp"
#include "plugins/library_environment.hpp"
#include "plugins/registry.hpp"

namespace mh {
namespace fs = std::filesystem;
namespace {

void log_from_plugin(int32_t level, const char* plugin, const char* message) {
  const char* name = plugin != nullptr ? plugin : "?";
  const char* text = message != nullptr ? message : "";
  switch (level) {
    case MH_LOG_ERROR: LOG(ERROR) << "[" << name << "] " << text; break;
    case MH_LOG_WARNING: LOG(WARNING) << "[" << name << "] " << text; break;
    case MH_LOG_DEBUG: VLOG(1) << "[" << name << "] " << text; break;
    default: LOG(INFO) << "[" << name << "] " << text; break;
  }
}

void append_path_list(const std::string& list, std::vector<fs::path>& out) {
  std::stringstream in(list);
  std::string item;
  while (std::getline(in, item, ':'))
    if (!item.empty()) out.emplace_back(item);
}

// A plugin built for another major exports only its own entry symbol; name
// it so the user learns which versions disagree.
std::string other_major_hint(const boost::dll::shared_library& lib) {
  for (int major = 0; major < 16; ++major) {
    if (major == MH_ABI_MAJOR) continue;
    if (lib.has("mh_plugin_entry_v" + std::to_string(major)))
      return "it was built for plugin ABI major " + std::to_string(major) + ", this host speaks " +
             std::to_string(MH_ABI_MAJOR) + "." + std::to_string(MH_ABI_MINOR) +
             "; rebuild it against this host's SDK";
  }
  return "it has no symbol " MH_ENTRY_SYMBOL "; it is not a megahost plugin (remove it from the plugin path)";
}

std::string version_text(uint32_t major, uint32_t minor) {
  return std::to_string(major) + "." + std::to_string(minor);
}

// Each kind's function table up to the last function the host calls; a
// shorter table is refused rather than called past its end.
size_t table_size_needed(int32_t kind) {
  switch (kind) {
    case MH_KIND_KERNELS: return MH_STRUCT_SIZE(MH_KernelsApi, sum_squares);
    case MH_KIND_COMM: return MH_STRUCT_SIZE(MH_CommApi, abort);
    case MH_KIND_TENSOR_PARALLEL: return MH_STRUCT_SIZE(MH_TensorParallelApi, plan);
    case MH_KIND_PIPELINE_PARALLEL: return MH_STRUCT_SIZE(MH_PipelineParallelApi, schedule);
    case MH_KIND_DATA_PARALLEL: return MH_STRUCT_SIZE(MH_DataParallelApi, plan);
    case MH_KIND_RECOMPUTE: return MH_STRUCT_SIZE(MH_RecomputeApi, decide);
    case MH_KIND_OBSERVER: return MH_STRUCT_SIZE(MH_ObserverApi, on_event);
    case MH_KIND_CONTEXT_PARALLEL: return MH_STRUCT_SIZE(MH_ContextParallelApi, plan);
    case MH_KIND_EXPERT_PARALLEL: return MH_STRUCT_SIZE(MH_ExpertParallelApi, plan);
    default: return MH_STRUCT_SIZE(MH_TunerApi, report);
  }
}

// Where a kind's function pointers start: after struct_size, and after the
// kernels' capability bits.
size_t first_entry_offset(int32_t kind) {
  return kind == MH_KIND_KERNELS ? offsetof(MH_KernelsApi, device_info) : sizeof(size_t);
}

// What is wrong with one component, as the rest of "component #i ...".
std::string component_problem(const MH_PluginDesc& d, const MH_ComponentDesc& c) {
  if (c.struct_size < MH_STRUCT_SIZE(MH_ComponentDesc, api)) return " has a descriptor that is too small";
  if (c.kind < 0 || c.kind >= MH_KIND_COUNT) return " has unknown kind " + std::to_string(c.kind);
  if (c.name == nullptr || c.name[0] == '\0') return " has no name";
  std::string which = " ('" + std::string(c.name) + "')";
  if (c.create == nullptr || c.destroy == nullptr || c.api == nullptr)
    return which + " lacks create, destroy or its function table";
  if (size_t table = *static_cast<const size_t*>(c.api); table < table_size_needed(c.kind))
    return which + " has a function table of " + std::to_string(table) + " bytes; its kind needs " +
           std::to_string(table_size_needed(c.kind));
  if (int null = first_null_entry(c.api, first_entry_offset(c.kind), table_size_needed(c.kind)); null >= 0)
    return which + " has a NULL entry #" + std::to_string(null) + " among those its kind requires (" +
           kind_name(c.kind) + "); only an optional entry may be NULL (abi.h)";
  if (c.num_options == 0) return "";
  if (c.options == nullptr) return which + " has a NULL option list";
  if (std::string problem = options_problem(c.options, c.num_options, d.option_size); !problem.empty()) return which + problem;
  return "";
}

bool load_one(const fs::path& file, LoadedPlugin& out, Diagnostics& diag) {
  namespace dll = boost::dll;
  std::string where = file.string();
  try {
    // RTLD_NODELETE: the library stays mapped to the end of the process (abi.h
    // rule 5) even when its handle is released as main returns. Unmapping
    // plugins at exit would also unmap their runtimes (libgomp) with state
    // still in use, which LeakSanitizer reports as leaks.
    const auto keep_loaded = static_cast<dll::load_mode::type>(RTLD_NODELETE);
    out.library.load(file.string(), dll::load_mode::rtld_now | dll::load_mode::rtld_local | keep_loaded);
  } catch (const std::exception& e) {
    diag.error(where, std::string("cannot load plugin: ") + e.what());
    return false;
  }
  if (!out.library.has(MH_ENTRY_SYMBOL) && out.library.has(abi1::kEntrySymbol)) {
    // Built for ABI 1.x: the 1.x adapter reads it (docs/sdk.md).
    try {
      out.desc = abi1::adapt_plugin(out.library.get<std::remove_pointer_t<abi1::EntryFn>>(abi1::kEntrySymbol));
    } catch (const Error& e) {
      diag.error(where, e.what());
      return false;
    }
    out.file = file;
    return true;
  }
  if (!out.library.has(MH_ENTRY_SYMBOL)) {
    diag.error(where, "refused: " + other_major_hint(out.library));
    return false;
  }
  auto entry = out.library.get<std::remove_pointer_t<MH_EntryFn>>(MH_ENTRY_SYMBOL);
  const MH_PluginDesc* desc = nullptr;
  try {
    check(entry(host_api(), &desc), "its entry point failed");
  } catch (const Error& e) {
    diag.error(where, e.what());
    return false;
  }
  if (std::string problem = descriptor_problem(desc); !problem.empty()) {
    diag.error(where, "refused: " + problem);
    return false;
  }
  if (desc->abi_minor > MH_ABI_MINOR)
    VLOG(1) << where << ": built for a newer minor " << version_text(desc->abi_major, desc->abi_minor);
  out.file = file;
  out.desc = desc;
  return true;
}

// Plugins are named mh_<name>.so (MegahostPlugin.cmake); any other shared
// object in a plugin folder is a library a plugin links, not one to load.
bool is_plugin_file(const fs::path& file) {
  return file.extension() == ".so" && file.filename().string().rfind("mh_", 0) == 0;
}

}  // namespace

std::string descriptor_problem(const MH_PluginDesc* d) {
  if (d == nullptr) return "its entry point returned no descriptor";
  if (d->struct_size < MH_STRUCT_SIZE(MH_PluginDesc, option_size))
    return "its descriptor is too small (struct_size " + std::to_string(d->struct_size) + ")";
  if (d->abi_major != MH_ABI_MAJOR)
    return "it was built for plugin ABI " + version_text(d->abi_major, d->abi_minor) +
           ", this host speaks " + version_text(MH_ABI_MAJOR, MH_ABI_MINOR) +
           "; majors must match: rebuild it against this host's SDK";
  if (d->name == nullptr || d->version == nullptr) return "its descriptor has no name or version";
  if (d->num_components == 0) return "";
  if (d->components == nullptr) return "its component list is NULL";
  const size_t stride = d->component_size;
  const size_t largest = largest_struct_size(d->components, stride, d->num_components);
  if (std::string problem = stride_problem("component_size", stride, largest); !problem.empty()) return problem;
  for (size_t i = 0; i < d->num_components; ++i)
    if (std::string problem = component_problem(*d, element(d->components, stride, i)); !problem.empty())
      return "component #" + std::to_string(i) + problem;
  return "";
}

const MH_HostApi* host_api() {
  static const MH_HostApi api{sizeof(MH_HostApi), MH_ABI_MAJOR,          MH_ABI_MINOR,
                              &log_from_plugin,   &host_find_component, &host_create_component,
                              nullptr};
  return &api;
}

std::vector<fs::path> plugin_search_path(const std::string& flag_value, Diagnostics& diag) {
  std::vector<fs::path> dirs;
  append_path_list(flag_value, dirs);
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec))
      diag.error("--plugin_path", "'" + dir.string() + "' is not a folder" + (ec ? ": " + ec.message() : "") +
                                      "; give the folders that hold the mh_*.so plugins");
  }
  if (const char* env = std::getenv("MEGAHOST_PLUGIN_PATH")) append_path_list(env, dirs);
  fs::path exe_dir = boost::dll::program_location().parent_path().string();
  dirs.push_back(exe_dir / "plugins");
  dirs.push_back(exe_dir / ".." / "lib" / "megahost" / "plugins");
  return dirs;
}

std::vector<LoadedPlugin> load_plugins(const std::vector<fs::path>& dirs, Diagnostics& diag) {
  std::vector<LoadedPlugin> plugins;
  prepare_library_environment();
  for (const auto& dir : dirs) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (const auto& entry : fs::directory_iterator(dir, ec))
      if (is_plugin_file(entry.path())) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
    for (const auto& file : files) {
      LoadedPlugin plugin;
      if (load_one(fs::weakly_canonical(file), plugin, diag)) plugins.push_back(std::move(plugin));
    }
  }
  return plugins;
}

}  // namespace mh
