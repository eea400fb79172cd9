// megahost: loads the plugins, reads the run's TOML, assembles the pipeline
// and runs it. Exit status: 0 success, 1 the run failed, 2 bad input.
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <filesystem>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "plugins/assembly.hpp"
#include "cli/command_line.hpp"
#include "config/config.hpp"
#include "run/dry_run.hpp"
#include "preflight/evaluation_check.hpp"
#include "generate/generate.hpp"
#include "serve/serve.hpp"
#include "preflight/launch_check.hpp"
#include "preflight/layout_check.hpp"
#include "preflight/memory_preflight.hpp"
#include "preflight/output_files.hpp"
#include "cli/plugin_list.hpp"
#include "plugins/plugin_loader.hpp"
#include "plugins/registry.hpp"
#include "run/run.hpp"
#include "run/stop_signals.hpp"
#include "preflight/size_limits.hpp"
#include "tuner/calibrate.hpp"
#include "tuner/hardware_profile.hpp"
#include "tuner/tune.hpp"

DEFINE_string(config, "", "run TOML; empty runs the embedded default config");
DEFINE_string(plugin_path, "", "colon-separated plugin folders searched before MEGAHOST_PLUGIN_PATH and the installed ones");
DEFINE_bool(evaluate, false,
            "train nothing: load checkpoint.load (or keep the initialised model) and report the loss, perplexity and "
            "tokens/s over the whole valid and test splits");
DEFINE_bool(dry_run, false, "assemble and plan the run against the dry kernels (memory only, nothing computed)");
DEFINE_string(metrics_out, "", "JSON-lines metrics file (overrides output.metrics)");
DEFINE_bool(list_plugins, false, "list every component of every plugin on the plugin path and exit");
DEFINE_string(grads_out, "", "write the full gradients of the last step to this file (layout-equivalence checks)");
DEFINE_bool(report_memory, false, "print each rank's measured memory peaks beside the paper's formulas");
DEFINE_string(calibrate, "",
              "measure this machine's kernels and collectives and write its hardware profile for the tuner: "
              "--calibrate quick (about a minute, a coarser grid) or --calibrate full (a bare --calibrate)");
DEFINE_string(calibrate_out, "",
              "where --calibrate writes the hardware profile; empty: local_cpu.toml in the user's folder "
              "($XDG_CONFIG_HOME/megahost/hardware, else ~/.config/megahost/hardware), searched before the shipped one");

namespace {

constexpr int kExitFailure = 1;
constexpr int kExitBadInput = 2;

// Every file this invocation may write, with the flag or key that names it.
std::vector<mh::OutputFile> outputs(const mh::Config& config, const mh::Assembly& assembly, const std::string& profile) {
  const bool from_flag = !FLAGS_metrics_out.empty();
  return {{from_flag ? "--metrics_out" : "output.metrics",
           from_flag ? FLAGS_metrics_out : config.resolve_if_set(assembly.output.options().get_string("metrics"))},
          {"--grads_out", FLAGS_grads_out},
          {"--calibrate_out", profile}};
}

// Where --calibrate writes: the flag, else the user's folder, so the shipped
// profile is never replaced by accident.
std::string calibrate_out(mh::Diagnostics& diag) {
  if (FLAGS_calibrate.empty() || !FLAGS_calibrate_out.empty()) return FLAGS_calibrate_out;
  const std::filesystem::path dir = mh::user_hardware_dir();
  if (dir.empty())
    diag.error("--calibrate_out", "neither XDG_CONFIG_HOME nor HOME is set, so the user's profile folder is unknown; "
                                  "pass --calibrate_out PATH");
  return dir.empty() ? "" : (dir / "local_cpu.toml").string();
}

int fail(const mh::Diagnostics& diag) {
  std::cerr << diag.report();
  std::cerr << diag.error_count() << " problem(s); nothing was run\n";
  return kExitBadInput;
}

}  // namespace

int main(int argc, char** argv) {
  gflags::SetUsageMessage("megahost --config run.toml [section.key=value ...]");
  gflags::SetVersionString("0.1.0");
  FLAGS_logtostderr = true;
  mh::keep_standard_streams_open();
  if (std::optional<int> status = mh::parse_command_line(argc, argv)) return *status;
  google::InitGoogleLogging(argv[0]);
  std::vector<std::string> overrides(argv + 1, argv + argc);

  mh::Diagnostics diag;
  std::vector<mh::LoadedPlugin> plugins = mh::load_plugins(mh::plugin_search_path(FLAGS_plugin_path, diag), diag);
  mh::Registry registry(plugins, diag);
  if (FLAGS_list_plugins) {
    std::cout << mh::list_plugins(registry);
    std::cerr << diag.report();
    return diag.has_errors() ? kExitBadInput : 0;
  }
  std::optional<mh::Config> config = mh::Config::load(FLAGS_config, overrides, diag);
  if (!config) return fail(diag);
  // A dry run is the same run against kernels that allocate and compute
  // nothing, so its memory accounting is exact and free.
  if (FLAGS_dry_run) {
    config->replace_section("kernels", mh::dry_kernels_section(*config, registry));
    if (std::optional<toml::table> comm = mh::dry_comm_section(*config)) config->replace_section("comm", *comm);
  }
  std::optional<mh::Assembly> assembly = mh::assemble(*config, registry, diag);
  if (!assembly) return fail(diag);
  const std::string profile = calibrate_out(diag);
  mh::check_output_files(outputs(*config, *assembly, profile), mh::run_inputs(*config, *assembly, plugins), diag);
  mh::check_launch(*config, *assembly, diag);
  if (!diag.has_errors()) mh::check_layout(*config, *assembly, diag);
  if (assembly->serves) mh::serve::check(*config, *assembly, diag);
  else if (assembly->generates) mh::generate::check(*config, *assembly, diag);
  mh::check_size_products(*config, *assembly, diag);
  if (FLAGS_evaluate) mh::check_evaluation(*config, *assembly, {FLAGS_dry_run, !FLAGS_calibrate.empty()}, diag);
  if (diag.has_errors()) return fail(diag);
  std::cerr << diag.report();

  // The memory check plans a training step, more than evaluation needs.
  const std::optional<mh::Assembly> memory_plan =
      FLAGS_dry_run || FLAGS_evaluate ? std::nullopt : mh::memory_plan_assembly(*config, registry);
  mh::RunFlags flags{FLAGS_dry_run, FLAGS_evaluate, FLAGS_metrics_out, FLAGS_report_memory, FLAGS_grads_out,
                     memory_plan ? &*memory_plan : nullptr};
  try {
    if (!FLAGS_calibrate.empty())
      return mh::calibrate(*config, registry, profile, mh::calibration_mode(FLAGS_calibrate));
    if (assembly->slot(MH_KIND_TUNER) != nullptr) return mh::tune(*assembly, *config, registry, mh::TuneFlags{FLAGS_plugin_path});
    return mh::run(*assembly, *config, flags);
  } catch (const mh::Interrupted& e) {
    LOG(ERROR) << e.what();
    return mh::interrupted_status(e.signal());
  } catch (const std::exception& e) {
    LOG(ERROR) << e.what();
    return kExitFailure;
  }
}
