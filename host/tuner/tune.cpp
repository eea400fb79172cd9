#include "tuner/tune.hpp"

#include <megahost/error.hpp>
#include <megahost/struct_size.hpp>

#include <glog/logging.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "engine/activations.hpp"
#include "engine/trainer.hpp"
#include "run/run.hpp"
#include "tuner/calibrate.hpp"
#include "tuner/candidate_config.hpp"
#include "tuner/candidate_keep.hpp"
#include "tuner/hardware_profile.hpp"
#include "tuner/probe.hpp"
#include "tuner/prompts_file.hpp"
#include "tuner/results_output.hpp"

namespace mh {
namespace fs = std::filesystem;
namespace {

// The tuner instance and its ABI 1.1 table, every call checked.
class TunerSession {
 public:
  explicit TunerSession(const Slot& slot) : instance_(slot, 1, -1), api_(instance_.api<MH_TunerApi>()) {
    require(reaches(*api_, &MH_TunerApi::results) && api_->results != nullptr,
            instance_.label() + " implements the tuner table of ABI 1.0 (next and report only); tuning needs "
                                "needs, begin and results of ABI 1.1: rebuild it against this SDK");
  }

  MH_TunerNeeds needs() {
    MH_TunerNeeds n{};
    n.struct_size = sizeof(n);
    check(api_->needs(instance_.get(), &n), instance_.label() + " needs");
    return n;
  }
  // ABI 1.4: every recompute policy the registry holds, so the tuner can
  // search any (a 1.3 tuner searches the ones it names).
  void recompute_policies(const Registry& registry) {
    if (api_->struct_size < MH_STRUCT_SIZE(MH_TunerApi, recompute_policies) || api_->recompute_policies == nullptr)
      return;
    const std::vector<std::string> names = registry.names(MH_KIND_RECOMPUTE);
    std::vector<const char*> raw;
    for (const std::string& n : names) raw.push_back(n.c_str());
    check(api_->recompute_policies(instance_.get(), raw.data(), raw.size()), instance_.label() + " recompute_policies");
  }
  void begin(const MH_ModelShape& shape, const MH_Hardware& hw) {
    check(api_->begin(instance_.get(), &shape, &hw), instance_.label() + " begin");
  }
  std::optional<MH_Candidate> next(const MH_ModelShape& shape) {
    MH_Candidate c{};
    c.struct_size = sizeof(c);
    int32_t done = 0;
    check(api_->next(instance_.get(), &shape, &c, &done), instance_.label() + " next");
    if (done) return std::nullopt;
    return c;
  }
  void report(const MH_Candidate& c, const MH_Estimate& e) {
    check(api_->report(instance_.get(), &c, &e), instance_.label() + " report");
  }
  // A tuner of another minor fills rows of another length: each is read
  // with the stride its struct_size has in an array (rounded up to the
  // row's alignment), the fields it lacks left 0 and those it adds skipped.
  std::span<const MH_TunerResult> results() {
    const MH_TunerResult* rows = nullptr;
    size_t count = 0;
    check(api_->results(instance_.get(), &rows, &count), instance_.label() + " results");
    rows_.assign(count, MH_TunerResult{});
    if (count == 0) return rows_;
    const size_t size = std::min(rows->struct_size, sizeof(MH_TunerResult));
    const auto* bytes = reinterpret_cast<const char*>(rows);
    const size_t align = alignof(MH_TunerResult), stride = (rows->struct_size + align - 1) / align * align;
    for (size_t i = 0; i < count; ++i) std::memcpy(&rows_[i], bytes + i * stride, size);
    return rows_;
  }

 private:
  Instance instance_;
  const MH_TunerApi* api_;
  std::vector<MH_TunerResult> rows_;
};

MH_ModelShape model_shape(const Assembly& assembly, const Config& config, int32_t devices) {
  const ModelDims d = global_dims(assembly, config);
  Options train = assembly.train.options();
  return model_shape(d, train.get_int("micro_batch"), train.get_int("global_batch"), devices);
}

struct Search {
  const Assembly& assembly;
  const Config& config;
  const Registry& registry;
  int64_t layers;
  const HardwareProfile& cluster;
  ProbeSettings probe;
  uint64_t capacity;  // bytes one rank may use
  const MH_TunerNeeds& needs;
  fs::path out;  // where the prompts files go
};

// A candidate's run: a training step, or a [generate] config serving the
// tuner's prompts with the candidate's batch.
// A measured generate run serves warm_up + kMeasuredBatches batches, one
// after the other; a dry run one.
toml::table run_config(const Search& s, const MH_Candidate& c, CandidateRun run, int64_t warm_up = 1) {
  if (c.workload == MH_WORKLOAD_TRAIN) return candidate_config(s.config, s.assembly, c, run, s.cluster);
  require(reaches(s.needs, &MH_TunerNeeds::output_tokens),
          "the tuner proposes inference candidates but says no prompt and output length (MH_TunerNeeds of ABI 1.4): "
          "rebuild it against this SDK");
  const int64_t batches = run == CandidateRun::kFull ? warm_up + kMeasuredBatches : 1;
  const GenerateRequest request{write_prompts_file(s.out, c.micro_batch, s.needs.prompt_tokens, batches),
                                s.needs.output_tokens};
  return generate_config(s.config, s.assembly, c, s.cluster, request);
}

// The memory of a candidate from a dry run of the real engine (a training
// step, or one prefill and one decode step), and what a rank may use.
void estimate(TunerSession& tuner, const Search& s, const MH_Candidate& c, int index) {
  MH_Estimate e{};
  e.struct_size = sizeof(e);
  e.capacity_bytes = s.capacity;
  const bool sharded = c.workload == MH_WORKLOAD_TRAIN && shards_optimizer(s.assembly, c);
  const std::string name = "candidate" + std::to_string(index);
  const fs::path file = s.probe.work_dir / (name + ".toml");
  write_toml(run_config(s, c, sharded ? CandidateRun::kFull : CandidateRun::kDry), file, "");
  DryRunMemory m = dry_run_memory(s.probe, file, name);
  std::vector<int32_t> keep;
  if (c.workload == MH_WORKLOAD_TRAIN) {
    try {
      keep = candidate_keep_table(file, s.registry, c, s.layers);
    } catch (const Error& error) {
      if (m.error.empty()) m.error = std::string("recompute '") + c.recompute + "': " + error.what();
    }
    if (!keep.empty()) {
      e.keep = keep.data();
      e.keep_layers = s.layers;
      e.activations = kActivationNames.data();
      e.num_activations = kActCount;
    }
  }
  LOG(INFO) << "dry run " << index << " " << describe_candidate(c) << ": "
            << (m.error.empty() ? gib(m.peak_bytes) + " GiB on rank " + std::to_string(m.peak_rank) + " (" + m.breakdown + ")"
                                : m.error);
  e.memory_bytes = m.peak_bytes;
  e.fits = m.error.empty() && m.peak_bytes <= s.capacity;
  e.failure = m.error.empty() ? nullptr : m.error.c_str();
  tuner.report(c, e);
}

// A real run of the candidate: its step times, or its generation's times;
// their median goes to the tuner, their spread to `spreads`.
// `predicted` is the cost model's seconds of one batch (inference).
std::optional<MH_Estimate> measure(const Search& s, const MH_Candidate& c, double predicted, const std::string& name,
                                   MeasuredSpreads& spreads) {
  const fs::path file = s.probe.work_dir / (name + ".toml");
  const int64_t warm_up = warm_up_batches(predicted);
  write_toml(run_config(s, c, CandidateRun::kFull, warm_up), file, "");
  MH_Estimate e{};
  e.struct_size = sizeof(e);
  e.measured = 1;
  std::string error, what;
  Spread spread;
  if (c.workload == MH_WORKLOAD_TRAIN) {
    const MeasuredRun run = measure_steps(s.probe, file, name, s.needs.measure_steps);
    error = run.error;
    spread = run.step;
    e.step_seconds = run.step.median;
    what = std::to_string(run.step.median) + " s per step (median of " + std::to_string(run.step.count) + ")";
  } else {
    const MeasuredGeneration run =
        measure_generation(s.probe, file, name, c.micro_batch, s.needs.output_tokens, warm_up);
    error = run.error;
    spread = run.latency;
    e.ttft_seconds = run.ttft_seconds;
    e.tpot_seconds = run.tpot_seconds;
    what = "time to first token " + std::to_string(run.ttft_seconds) + " s, " + std::to_string(1e3 * run.tpot_seconds) +
           " ms per output token (medians of " + std::to_string(run.latency.count) + " batches)";
  }
  LOG(INFO) << "measured " << describe_candidate(c) << ": " << (error.empty() ? what : error);
  if (!error.empty()) return std::nullopt;
  spreads[describe_candidate(c)] = spread;
  return e;
}

MeasuredSpreads measure_best(TunerSession& tuner, const Search& s) {
  std::vector<std::pair<MH_Candidate, double>> best;  // with the cost model's seconds of one batch
  for (const auto& r : tuner.results())
    if (r.verdict == MH_VERDICT_RANKED && r.rank <= s.needs.measure_top_k)
      best.emplace_back(*r.candidate, r.latency_seconds);
  MeasuredSpreads spreads;
  for (size_t i = 0; i < best.size(); ++i)
    if (std::optional<MH_Estimate> e =
            measure(s, best[i].first, best[i].second, "measured" + std::to_string(i), spreads))
      tuner.report(best[i].first, *e);
  return spreads;
}

// This CPU's model as /proc/cpuinfo names it (the cpu kernels' device name
// holds it); empty when unknown.
std::string this_cpu() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("model name", 0) == 0 && line.find(':') != std::string::npos) return line.substr(line.find(':') + 2);
  return "";
}

// A CPU profile prices this machine only if it was measured on this CPU.
// One that --calibrate measured on another CPU is replaced by a quick
// calibration of this one (written beside the tuner's outputs, so the
// ranking can be checked against it); one written by hand is used as
// given, with a warning.
HardwareProfile profile_for_this_cpu(HardwareProfile given, const Config& config, const Registry& registry,
                                     const fs::path& out) {
  const std::string model = this_cpu();
  if (!given.shared_device || model.empty() || given.device.find(model) != std::string::npos) return given;
  const std::string elsewhere = "hardware profile '" + given.name + "' (" + given.file + ") was calibrated on '" +
                                given.device + "', not this CPU ('" + model + "')";
  if (given.calibrated.empty()) {
    LOG(WARNING) << elsewhere << ": its rates may not hold here; recalibrate with `megahost --calibrate` "
                 << "and tune with the profile it writes";
    return given;
  }
  const fs::path file = out / "local_cpu_quick.toml";
  std::cout << elsewhere << ": measuring this CPU with `megahost --calibrate quick` (about a minute) into " << file.string()
            << " and tuning with it; `megahost --calibrate` writes the full profile, found by name next time\n";
  try {
    HardwareProfile quick = measure_this_machine(config, registry, CalibrationMode::kQuick);
    write_hardware_profile(quick, file, "# This machine, measured by the tuner's quick calibration (`megahost --calibrate quick`).\n\n");
    quick.file = file.string();
    return quick;
  } catch (const Error& e) {
    LOG(WARNING) << e.what() << "; tuning with '" << given.name << "' as given, whose rates may not hold here";
    return given;
  }
}

fs::path output_dir(const Assembly& assembly, const Config& config) {
  const std::string dir = assembly.output.options().get_string("dir");
  return config.resolve(dir.empty() ? "tuner_out" : dir);
}

}  // namespace

int tune(const Assembly& assembly, const Config& config, const Registry& registry, const TuneFlags& flags) {
  TunerSession tuner(*assembly.slot(MH_KIND_TUNER));
  tuner.recompute_policies(registry);
  const MH_TunerNeeds needs = tuner.needs();
  Diagnostics diag;
  // A file is relative to the config, as data paths are; a name is looked up.
  const std::string cluster = fs::path(needs.hardware).extension() == ".toml" ? config.resolve(needs.hardware).string()
                                                                                 : std::string(needs.hardware);
  std::optional<HardwareProfile> given = load_hardware_profile(cluster, hardware_search_path(config), diag);
  require(given.has_value(), diag.report());
  const fs::path out = output_dir(assembly, config);
  fs::create_directories(out / "runs");
  const HardwareProfile profile = profile_for_this_cpu(*given, config, registry, out);
  const int32_t per_node = needs.devices_per_node > 0 ? needs.devices_per_node : profile.devices_per_node;
  const MH_ModelShape shape = model_shape(assembly, config, needs.nodes * per_node);
  tuner.begin(shape, profile.view());

  const fs::path binary = fs::read_symlink("/proc/self/exe");
  Search s{assembly, config, registry, shape.layers, profile, ProbeSettings{binary, flags.plugin_path, out / "runs"},
           profile.shared_device ? profile.memory_bytes / uint64_t(per_node) : profile.memory_bytes, needs, out};
  int index = 0;
  while (std::optional<MH_Candidate> c = tuner.next(shape)) estimate(tuner, s, *c, index++);
  LOG(INFO) << "estimated " << index << " candidate(s) on " << profile.name;
  const MeasuredSpreads spreads = needs.measure_top_k > 0 ? measure_best(tuner, s) : MeasuredSpreads{};
  const TunedRun run{config, assembly, profile, shape, out, per_node, binary, needs, spreads};
  return write_results(tuner.results(), run, std::cout) ? 0 : 1;
}

}  // namespace mh
