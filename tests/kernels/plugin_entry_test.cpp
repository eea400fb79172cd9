// The built modules, loaded the way the host loads them: dlopen, the entry
// symbol, the descriptor, create through it.
#include "test_util.hpp"

#include <dlfcn.h>

#include <cstring>

namespace mh::kernels::test {
namespace {

// Loads a module and calls its entry point; like the host, never unloads it.
const MH_PluginDesc* load(const char* path) {
  void* library = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) throw std::runtime_error(dlerror());
  auto entry = reinterpret_cast<MH_EntryFn>(dlsym(library, MH_ENTRY_SYMBOL));
  if (entry == nullptr) throw std::runtime_error(std::string(path) + " has no " + MH_ENTRY_SYMBOL);
  static const MH_HostApi host{MH_STRUCT_SIZE(MH_HostApi, log), MH_ABI_MAJOR, MH_ABI_MINOR,
                               [](int32_t, const char*, const char*) {}};
  const MH_PluginDesc* desc = nullptr;
  mh::check(entry(&host, &desc), path);
  return desc;
}

void expect_kernels_plugin(const MH_PluginDesc& desc, const char* plugin, const char* component,
                           std::vector<std::string> options) {
  EXPECT_EQ(desc.abi_major, uint32_t{MH_ABI_MAJOR});
  EXPECT_STREQ(desc.name, plugin);
  ASSERT_EQ(desc.num_components, 1u);
  const MH_ComponentDesc& c = desc.components[0];
  EXPECT_EQ(c.kind, MH_KIND_KERNELS);
  EXPECT_STREQ(c.name, component);
  std::vector<std::string> names;
  for (size_t i = 0; i < c.num_options; ++i) names.emplace_back(c.options[i].name);
  EXPECT_EQ(names, options);
  ASSERT_NE(c.api, nullptr);
  EXPECT_EQ(static_cast<const MH_KernelsApi*>(c.api)->struct_size, MH_STRUCT_SIZE(MH_KernelsApi, attention_bwd));
  EXPECT_EQ(c.extensions, nullptr) << "host kernels run each op before returning: no stream to expose";
}

TEST(PluginEntry, CpuModuleListsTheCpuKernels) {
  expect_kernels_plugin(*load(MH_KERNELS_CPU_MODULE), "kernels_cpu", "cpu", {"threads", "peak_gflops", "dtype", "memory_gb", "bf16_gemm"});
}

TEST(PluginEntry, DryModuleListsTheDryKernels) {
  expect_kernels_plugin(*load(MH_KERNELS_DRY_MODULE), "kernels_dry", "dry", {"peak_gflops", "dtype"});
}

TEST(PluginEntry, CpuModuleCreatesAnInstanceThatComputes) {
  const MH_ComponentDesc& c = load(MH_KERNELS_CPU_MODULE)->components[0];
  MH_NamedValue values[4]{};
  values[0].name = "threads";
  values[0].type = MH_VALUE_INT;
  values[0].value.i = 1;
  values[1].name = "peak_gflops";
  values[1].type = MH_VALUE_DOUBLE;
  values[1].value.d = 10;
  values[2].name = "dtype";
  values[2].type = MH_VALUE_STRING;
  values[2].value.s = "fp32";
  values[3].name = "memory_gb";
  values[3].type = MH_VALUE_DOUBLE;
  values[3].value.d = 0;
  const MH_Options options{MH_STRUCT_SIZE(MH_Options, section), values, 4, "kernels"};
  const MH_CreateArgs args{MH_STRUCT_SIZE(MH_CreateArgs, rank), &options, 1, 0};
  MH_Instance* self = nullptr;
  mh::check(c.create(&args, &self), "create");
  const auto& api = *static_cast<const MH_KernelsApi*>(c.api);

  std::vector<float> a = {1, 2, 3, 4}, b = {5, 6, 7, 8}, out(4);
  MH_GemmArgs gemm{};
  gemm.struct_size = MH_STRUCT_SIZE(MH_GemmArgs, beta);
  gemm.a = view(a, {1, 2, 2});
  gemm.b = view(b, {1, 2, 2});
  gemm.c = view(out, {1, 2, 2});
  gemm.alpha = 1.0f;
  mh::check(api.gemm(self, &gemm), "gemm");
  EXPECT_EQ(out, (std::vector<float>{19, 22, 43, 50}));

  MH_DeviceInfo info{};
  info.struct_size = MH_STRUCT_SIZE(MH_DeviceInfo, threads);  // an older host knowing fewer fields
  info.peak_flops = -1.0;
  mh::check(api.device_info(self, &info), "device_info");
  EXPECT_EQ(info.threads, 1);
  EXPECT_EQ(info.peak_flops, -1.0) << "written past the caller's struct_size";
  c.destroy(self);
}

}  // namespace
}  // namespace mh::kernels::test
