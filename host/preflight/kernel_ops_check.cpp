#include "preflight/kernel_ops_check.hpp"

#include <megahost/abi.h>

#include <vector>

#include "engine/device.hpp"

namespace mh {
namespace {

struct NeededOp {
  const char* name;
  size_t end;  // where the table member ends
  const char* needed_by;
};

// The members a specification's parts (and generation) call beyond those
// of every table.
std::vector<NeededOp> needed_ops(const ModelSpec& spec, bool generates) {
  std::vector<NeededOp> out;
  // Only a 1.4 table has strided_copy, and only a 1.4 plugin takes the
  // non-square softmax the cached attention gives it.
  if (generates)
    out.push_back({"strided_copy", MH_STRUCT_SIZE(MH_KernelsApi, strided_copy), "[generate] (its KV cache)"});
  if (spec.norm == Norm::kRmsNorm) {
    out.push_back({"rmsnorm", MH_STRUCT_SIZE(MH_KernelsApi, rmsnorm), "model.normalization = \"rmsnorm\""});
    out.push_back({"rmsnorm_bwd", MH_STRUCT_SIZE(MH_KernelsApi, rmsnorm_bwd), "model.normalization = \"rmsnorm\""});
  }
  if (spec.position == Position::kRope)
    out.push_back({"rope", MH_STRUCT_SIZE(MH_KernelsApi, rope), "model.position = \"rope\""});
  if (spec.activation == MlpActivation::kSwiglu) {
    out.push_back({"swiglu", MH_STRUCT_SIZE(MH_KernelsApi, swiglu), "model.activation = \"swiglu\""});
    out.push_back({"swiglu_bwd", MH_STRUCT_SIZE(MH_KernelsApi, swiglu_bwd), "model.activation = \"swiglu\""});
  }
  return out;
}

}  // namespace

void check_kernel_ops(const Config& config, const Assembly& assembly, const ModelSpec& spec, Diagnostics& diag) {
  const Slot* kernels = assembly.slot(MH_KIND_KERNELS);
  if (kernels == nullptr) return;
  const auto* table = static_cast<const MH_KernelsApi*>(kernels->component->desc->api);
  const uint32_t minor = kernels->component->plugin->desc->abi_minor;
  for (const NeededOp& op : needed_ops(spec, assembly.generates))
    if (op.end > table->struct_size)
      diag.error(config.where(find_table(config.root(), "model")),
                 missing_op_message(kernels->component->desc->name, minor, op.name, op.end, op.needed_by));
}

}  // namespace mh
