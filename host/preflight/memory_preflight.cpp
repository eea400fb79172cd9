#include "preflight/memory_preflight.hpp"

#include <megahost/error.hpp>

#include <string>
#include <utility>

#include "config/diagnostics.hpp"
#include "run/dry_run.hpp"
#include "engine/device.hpp"

namespace mh {
namespace {

// "params 0.10 MiB, activations 1.20 MiB, ...": the categories that plan any memory.
std::string breakdown(const MemoryTracker& m) {
  std::string out;
  for (size_t c = 0; c < kMemCategories; ++c) {
    const uint64_t bytes = m.peak(static_cast<MemCategory>(c));
    if (bytes == 0) continue;
    out += (out.empty() ? "" : ", ") + std::string(category_name(static_cast<MemCategory>(c))) + " " + memory_text(bytes);
  }
  return out;
}

void require_fits(const MemoryTracker& planned, const MH_DeviceInfo& device) {
  const uint64_t capacity = device.memory_bytes, need = planned.total_peak();
  if (capacity == 0 || device.dry != 0 || need <= capacity) return;
  throw Error(MH_RESOURCE_EXHAUSTED,
              "before step 1, nothing allocated: the dry run plans " + memory_text(need) +
                  " for this rank at its peak (" + breakdown(planned) + "), more than the " + memory_text(capacity) +
                  " its device has (" + device.name +
                  "); lower train.micro_batch, model.seq_len or the model's size, shard it over more ranks "
                  "(parallel.tensor.size, parallel.pipeline.size, parallel.data.distributed_optimizer) or "
                  "recompute activations ([recompute]); see every rank's plan with --dry_run. On the cpu, "
                  "kernels.memory_gb sets the memory a rank may use (the override)");
}

// The settings of a dry pass of `s`: one step against the plan's kernels,
// reporting and writing nothing. Restored as it goes out of scope.
class DryPass {
 public:
  DryPass(RunSetup& s, const Assembly& plan)
      : s_(s),
        assembly_(std::exchange(s.assembly, &plan)),
        dry_run_(std::exchange(s.dry_run, true)),
        plan_only_(std::exchange(s.plan_only, true)),
        steps_(std::exchange(s.steps, 1)),
        resume_from_(std::exchange(s.resume_from, "")),
        grads_out_(std::exchange(s.grads_out, "")),
        metrics_(std::exchange(s.metrics, std::make_unique<MetricsWriter>(""))) {}
  ~DryPass() {
    s_.assembly = assembly_;
    s_.dry_run = dry_run_;
    s_.plan_only = plan_only_;
    s_.steps = steps_;
    s_.resume_from = std::move(resume_from_);
    s_.grads_out = std::move(grads_out_);
    s_.metrics = std::move(metrics_);
  }
  DryPass(const DryPass&) = delete;
  DryPass& operator=(const DryPass&) = delete;

  const Assembly& real() const { return *assembly_; }

 private:
  RunSetup& s_;
  const Assembly* assembly_;
  bool dry_run_, plan_only_;
  int64_t steps_;
  std::string resume_from_, grads_out_;
  std::unique_ptr<MetricsWriter> metrics_;
};

}  // namespace

std::optional<Assembly> memory_plan_assembly(const Config& config, const Registry& registry) {
  if (registry.find(MH_KIND_KERNELS, "dry") == nullptr) return std::nullopt;
  Config dry = config;
  dry.replace_section("kernels", dry_kernels_section(config, registry));
  Diagnostics ignored;  // the same config, already validated with its own kernels
  std::optional<Assembly> plan = assemble(dry, registry, ignored);
  // The plan's dry steps are not the run's: an observer counts only the run.
  if (plan) std::erase_if(plan->slots, [](const Slot& s) { return s.kind == MH_KIND_OBSERVER; });
  return plan;
}

void check_planned_memory(RunSetup& s, const Assembly& plan, const RankRunner& run_ranks) {
  DryPass pass(s, plan);
  const Slot& kernels = *pass.real().slot(MH_KIND_KERNELS);
  run_ranks([&](int32_t local) {
    const MemoryTracker planned = train_rank(s, local);
    const Instance instance(kernels, s.comm_info.ranks_in_process, s.comm_info.first_rank + local);
    require_fits(planned, Device(instance).info());
  });
}

}  // namespace mh
