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
  bool present;
};

template <class Op>
NeededOp needed(const MH_KernelsApi& table, Op MH_KernelsApi::*op, const char* name, const char* needed_by) {
  return {name, member_end(table, op), needed_by, has_entry(table, op)};
}

// The members a specification's parts (and generation) call beyond those
// of every table.
std::vector<NeededOp> needed_ops(const MH_KernelsApi& t, const ModelSpec& spec, bool generates) {
  std::vector<NeededOp> out;
  if (generates) out.push_back(needed(t, &MH_KernelsApi::strided_copy, "strided_copy", "[generate] (its KV cache)"));
  if (spec.norm == Norm::kRmsNorm) {
    out.push_back(needed(t, &MH_KernelsApi::rmsnorm, "rmsnorm", "model.normalization = \"rmsnorm\""));
    out.push_back(needed(t, &MH_KernelsApi::rmsnorm_bwd, "rmsnorm_bwd", "model.normalization = \"rmsnorm\""));
  }
  if (spec.position == Position::kRope) out.push_back(needed(t, &MH_KernelsApi::rope, "rope", "model.position = \"rope\""));
  if (spec.activation == MlpActivation::kSwiglu) {
    out.push_back(needed(t, &MH_KernelsApi::swiglu, "swiglu", "model.activation = \"swiglu\""));
    out.push_back(needed(t, &MH_KernelsApi::swiglu_bwd, "swiglu_bwd", "model.activation = \"swiglu\""));
  }
  if (spec.attention_backend == AttentionBackend::kFlash) {
    out.push_back(needed(t, &MH_KernelsApi::attention, "attention", "model.attention_backend = \"flash\""));
    out.push_back(needed(t, &MH_KernelsApi::attention_bwd, "attention_bwd", "model.attention_backend = \"flash\""));
  }
  return out;
}

}  // namespace

void check_kernel_ops(const Config& config, const Assembly& assembly, const ModelSpec& spec, Diagnostics& diag) {
  const Slot* kernels = assembly.slot(MH_KIND_KERNELS);
  if (kernels == nullptr) return;
  const auto* table = static_cast<const MH_KernelsApi*>(kernels->component->desc->api);
  const MH_PluginDesc& plugin = *kernels->component->plugin->desc;
  for (const NeededOp& op : needed_ops(*table, spec, assembly.generates))
    if (!op.present)
      diag.error(config.where(find_table(config.root(), "model")),
                 missing_op_message(kernels->component->desc->name, plugin, op.name, op.end, op.needed_by));
  // The cached attention's decode gives softmax [G, Q, T] scores with Q < T.
  if (assembly.generates && (kernels_capabilities(*table) & MH_KERNELS_CAP_PARTIAL_SOFTMAX) == 0)
    diag.error(config.where(find_table(config.root(), "kernels")),
               "kernels plugin \"" + std::string(kernels->component->desc->name) +
                   "\" lacks MH_KERNELS_CAP_PARTIAL_SOFTMAX (softmax over the last Q of T positions), which [generate] "
                   "needs; give its kernels class that capability once its softmax takes such scores");
  // Packed documents hand softmax each row's document start and rope each
  // row's position; a component without the capability would ignore them.
  const Options data = assembly.data.options();
  const char* packing = data.get_bool("reset_attention_mask")                                  ? "reset_attention_mask"
                        : data.get_bool("reset_position_ids") && spec.position == Position::kRope ? "reset_position_ids"
                                                                                                 : nullptr;
  if (!assembly.generates && packing != nullptr && (kernels_capabilities(*table) & MH_KERNELS_CAP_DOCUMENTS) == 0)
    diag.error(config.where(find_table(config.root(), "data")),
               "data." + std::string(packing) + " needs kernels with MH_KERNELS_CAP_DOCUMENTS (ABI 1.6: softmax "
                   "masks by document start, rope takes per-token positions), which kernels plugin \"" +
                   kernels->component->desc->name +
                   "\" lacks; use kernels \"cpu\" or \"cuda\", or turn the option off");
}

}  // namespace mh
