// Loads a communicator plugin the way the host does (dlopen with
// RTLD_LOCAL, the one entry symbol, the component found by kind and name),
// creates it with its declared defaults plus name=value overrides, and runs
// an all_reduce of the global ranks on every local rank.
//
//   comm_plugin_load <plugin.so> <component> [name=value ...]
#include "comm_harness.hpp"

#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <string>

namespace mh::comm::testing {
namespace {

void log_line(int32_t, const char* plugin, const char* message) { std::fprintf(stderr, "[%s] %s\n", plugin, message); }

const MH_ComponentDesc& find_component(const char* path, const std::string& name) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw std::runtime_error(std::string("dlopen: ") + dlerror());
  auto entry = reinterpret_cast<MH_EntryFn>(dlsym(library, MH_ENTRY_SYMBOL));
  if (entry == nullptr) throw std::runtime_error(std::string("no ") + MH_ENTRY_SYMBOL + " in " + path);
  static const MH_HostApi host{MH_STRUCT_SIZE(MH_HostApi, log), MH_ABI_MAJOR, MH_ABI_MINOR, &log_line};
  const MH_PluginDesc* plugin = nullptr;
  check(entry(&host, &plugin), "entry");
  for (size_t i = 0; i < plugin->num_components; ++i)
    if (plugin->components[i].kind == MH_KIND_COMM && name == plugin->components[i].name)
      return plugin->components[i];
  throw std::runtime_error("no comm component '" + name + "' in " + path);
}

Overrides parse(int argc, char** argv) {
  Overrides out;
  for (int i = 3; i < argc; ++i) {
    const std::string arg = argv[i];
    const size_t eq = arg.find('=');
    if (eq == std::string::npos) throw std::runtime_error("expected name=value, got " + arg);
    out.emplace_back(arg.substr(0, eq), std::stod(arg.substr(eq + 1)));
  }
  return out;
}

int run(int argc, char** argv) {
  Comm comm(find_component(argv[1], argv[2]), parse(argc, argv));
  const int32_t world = comm.info().world_size;
  std::atomic<int> failures{0};
  run_ranks(comm, [&](int32_t rank, MH_Group* group) {
    int64_t mine = rank, sum = -1;
    auto a = args<int64_t>({&mine, 1}, {&sum, 1});
    Status s(comm.api().all_reduce(group, &a));
    if (!s.ok() || sum != int64_t{world} * (world - 1) / 2) {
      std::fprintf(stderr, "rank %d: all_reduce gave %lld (%s)\n", rank, static_cast<long long>(sum), s.message.c_str());
      ++failures;
    }
  });
  std::printf("%s/%s: %d ranks, all_reduce %s\n", argv[1], argv[2], world, failures == 0 ? "OK" : "FAILED");
  return failures == 0 ? 0 : 1;
}

}  // namespace
}  // namespace mh::comm::testing

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s <plugin.so> <component> [name=value ...]\n", argv[0]);
    return 2;
  }
  try {
    return mh::comm::testing::run(argc, argv);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
}
