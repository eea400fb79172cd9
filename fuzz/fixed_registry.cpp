#include "fixed_registry.hpp"

#include <megahost/options.hpp>

#include <vector>

namespace mh::fuzz {
namespace {

const MH_OptionSpec kCpu[] = {
    opt_int("threads", "0", 0, 1024, "worker threads; 0: the cores divided between ranks"),
};
const MH_OptionSpec kDry[] = {
    opt_choice("dtype", "\"f32\"", "f32|bf16|f16", "modelled compute dtype"),
    opt_double("peak_gflops", "1000", 1e-3, 1e9, "modelled peak"),
};
const MH_OptionSpec kThreads[] = {
    opt_int("world_size", "1", 1, 1024, "ranks"),
    opt_double("timeout_s", "60", 0.1, 1e9, "collective timeout"),
};
const MH_OptionSpec kTensor[] = {
    opt_int("size", "1", 1, 1024, "tensor-parallel ranks"),
    opt_bool("sequence_parallel", "false", "shard layernorm and dropout along the sequence"),
};
const MH_OptionSpec kPipeline[] = {
    opt_int("size", "1", 1, 1024, "pipeline stages"),
    opt_choice("schedule", "\"1f1b\"", "gpipe|1f1b|interleaved", "schedule"),
};
const MH_OptionSpec kFull[] = {
    opt_choice("method", "\"uniform\"", "uniform|block", "which layers"),
    opt("num_layers", MH_VALUE_INT, nullptr, "layers per recomputed group (required)"),
};
const MH_OptionSpec kTuner[] = {
    opt_choice("goal", nullptr, "train|latency|throughput", "what to optimise (required)"),
    opt("memory_gb", MH_VALUE_DOUBLE, "0", "memory limit per rank; 0: none"),
};

// A function table holding only its size: the registry reads every entry as
// absent. The targets assemble runs; they never call a component.
constexpr size_t kSizeOnlyTable = sizeof(size_t);

template <size_t N>
MH_ComponentDesc component(int32_t kind, const char* name, const MH_OptionSpec (&options)[N]) {
  return MH_ComponentDesc{MH_STRUCT_SIZE(MH_ComponentDesc, api), kind, name, "1.0", "fixed specs", options, N,
                          nullptr, nullptr, &kSizeOnlyTable};
}
MH_ComponentDesc component(int32_t kind, const char* name) {
  return MH_ComponentDesc{MH_STRUCT_SIZE(MH_ComponentDesc, api), kind, name, "1.0", "fixed specs", nullptr, 0,
                          nullptr, nullptr, &kSizeOnlyTable};
}

const MH_ComponentDesc kComponents[] = {
    component(MH_KIND_KERNELS, "cpu", kCpu),
    component(MH_KIND_KERNELS, "dry", kDry),
    component(MH_KIND_COMM, "threads", kThreads),
    component(MH_KIND_TENSOR_PARALLEL, "megatron", kTensor),
    component(MH_KIND_PIPELINE_PARALLEL, "megatron", kPipeline),
    component(MH_KIND_DATA_PARALLEL, "megatron"),
    component(MH_KIND_RECOMPUTE, "none"),
    component(MH_KIND_RECOMPUTE, "full", kFull),
    component(MH_KIND_TUNER, "grid", kTuner),
};

const MH_PluginDesc kPlugin{MH_STRUCT_SIZE(MH_PluginDesc, option_size),
                            MH_ABI_MAJOR,
                            MH_ABI_MINOR,
                            "fixed_specs",
                            "1.0",
                            kComponents,
                            std::size(kComponents),
                            sizeof(MH_ComponentDesc),
                            sizeof(MH_OptionSpec)};

std::vector<LoadedPlugin> fixed_plugins() {
  std::vector<LoadedPlugin> plugins(1);
  plugins[0].file = "fixed_specs.so";
  plugins[0].desc = &kPlugin;
  return plugins;
}

}  // namespace

const Registry& fixed_registry() {
  static const std::vector<LoadedPlugin> plugins = fixed_plugins();
  static Diagnostics ignored;
  static const Registry registry(plugins, ignored);
  return registry;
}

}  // namespace mh::fuzz
