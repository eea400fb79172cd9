// The cuda kernels and nccl comm modules as the host sees them: what their
// descriptors declare, and a clean MH_UNAVAILABLE from create where there is
// no CUDA device. These run on any machine.
#include "gpu_harness.hpp"

#include <gtest/gtest.h>

#include <cstddef>

namespace mh::gpu_test {
namespace {

std::vector<std::string> option_names(const MH_ComponentDesc& c) {
  std::vector<std::string> names;
  for (size_t i = 0; i < c.num_options; ++i) names.emplace_back(c.options[i].name);
  return names;
}

// Every entry of a function table from byte `first` (past struct_size and
// any data fields) to its struct_size is set.
template <class Table>
void expect_every_entry_set(const Table& table, size_t first = sizeof(size_t)) {
  const size_t entries = (table.struct_size - first) / sizeof(void*);
  ASSERT_EQ(first + entries * sizeof(void*), table.struct_size);
  for (size_t i = 0; i < entries; ++i) {
    void* entry = nullptr;
    std::memcpy(&entry, reinterpret_cast<const char*>(&table) + first + i * sizeof(void*), sizeof(void*));
    EXPECT_NE(entry, nullptr) << "entry " << i;
  }
}

void expect_option(const MH_ComponentDesc& c, size_t i, const char* name, int32_t type, const char* default_value) {
  const MH_OptionSpec& spec = c.options[i];
  EXPECT_EQ(spec.struct_size, MH_STRUCT_SIZE(MH_OptionSpec, doc));
  EXPECT_STREQ(spec.name, name);
  EXPECT_EQ(spec.type, type) << name;
  EXPECT_STREQ(spec.default_value, default_value) << name;
  EXPECT_NE(spec.doc, nullptr) << name;
}

void expect_no_device_refusal(const MH_ComponentDesc& desc) {
  Created c = create(desc, {});
  if (c.error == nullptr) {
    desc.destroy(c.self);
    GTEST_SKIP() << "a CUDA device is present: create succeeded";
  }
  EXPECT_EQ(c.error->code, MH_UNAVAILABLE);
  EXPECT_EQ(std::string(c.error->message).rfind("no CUDA device: ", 0), 0u) << c.error->message;
}

TEST(CudaKernelsModule, DescribesTheCudaKernelsComponent) {
  const MH_PluginDesc& plugin = load_plugin(MH_KERNELS_CUDA_MODULE);
  EXPECT_EQ(plugin.abi_major, uint32_t{MH_ABI_MAJOR});
  EXPECT_EQ(plugin.abi_minor, uint32_t{MH_ABI_MINOR});
  EXPECT_STREQ(plugin.name, "kernels_cuda");
  ASSERT_EQ(plugin.num_components, 1u);
  const MH_ComponentDesc& c = plugin.components[0];
  EXPECT_EQ(c.struct_size, MH_STRUCT_SIZE(MH_ComponentDesc, extensions));
  EXPECT_EQ(c.kind, MH_KIND_KERNELS);
  EXPECT_STREQ(c.name, "cuda");
  ASSERT_EQ(option_names(c), (std::vector<std::string>{"device", "dtype", "peak_tflops"}));
  expect_option(c, 0, "device", MH_VALUE_INT, "-1");
  expect_option(c, 1, "dtype", MH_VALUE_STRING, "\"bf16\"");
  EXPECT_STREQ(c.options[1].choices, "bf16|fp32");
  expect_option(c, 2, "peak_tflops", MH_VALUE_DOUBLE, "0");
  const auto& api = *static_cast<const MH_KernelsApi*>(c.api);
  EXPECT_EQ(api.struct_size, MH_STRUCT_SIZE(MH_KernelsApi, attention_bwd));
  expect_every_entry_set(api, MH_STRUCT_SIZE(MH_KernelsApi, capabilities));
  // Its ops are enqueued on a stream, which the host reads from the chain.
  const auto* stream =
      reinterpret_cast<const MH_StreamExtension*>(MH_FindExtension(c.extensions, MH_EXTENSION_STREAM));
  ASSERT_NE(stream, nullptr);
  EXPECT_EQ(stream->base.struct_size, MH_STRUCT_SIZE(MH_StreamExtension, stream));
  EXPECT_NE(stream->stream, nullptr);
}

TEST(CudaKernelsModule, CreateWithoutADeviceIsUnavailable) {
  expect_no_device_refusal(only_component(MH_KERNELS_CUDA_MODULE));
}

#ifdef MH_COMM_NCCL_MODULE
TEST(NcclCommModule, DescribesTheNcclComponent) {
  const MH_PluginDesc& plugin = load_plugin(MH_COMM_NCCL_MODULE);
  EXPECT_EQ(plugin.abi_major, uint32_t{MH_ABI_MAJOR});
  EXPECT_STREQ(plugin.name, "comm_nccl");
  ASSERT_EQ(plugin.num_components, 1u);
  const MH_ComponentDesc& c = plugin.components[0];
  EXPECT_EQ(c.kind, MH_KIND_COMM);
  EXPECT_STREQ(c.name, "nccl");
  ASSERT_EQ(option_names(c), (std::vector<std::string>{"world_size", "timeout_s"}));
  expect_option(c, 0, "world_size", MH_VALUE_INT, "1");
  expect_option(c, 1, "timeout_s", MH_VALUE_DOUBLE, "30");
  const auto& api = *static_cast<const MH_CommApi*>(c.api);
  EXPECT_EQ(api.struct_size, MH_STRUCT_SIZE(MH_CommApi, all_to_all));
  expect_every_entry_set(api);
}

TEST(NcclCommModule, CreateWithoutADeviceIsUnavailable) {
  expect_no_device_refusal(only_component(MH_COMM_NCCL_MODULE));
}
#endif

}  // namespace
}  // namespace mh::gpu_test
