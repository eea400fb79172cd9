#include "preflight/evaluation_check.hpp"

#include <exception>
#include <string>

#include "data/data_sources.hpp"
#include "run/run.hpp"

namespace mh {
namespace {

void check_modes(const Config& config, const Assembly& assembly, const OtherModes& other, Diagnostics& diag) {
  if (other.dry_run)
    diag.error("--dry_run", "--evaluate computes the model's loss, which a dry run cannot; drop one of the two");
  if (other.calibrate) diag.error("--calibrate", "--evaluate and --calibrate are two runs; give one of them");
  if (assembly.slot(MH_KIND_TUNER) != nullptr)
    diag.error(config.where(find_table(config.root(), "tuner")),
               "a config with [tuner] tunes; remove the [tuner] section to evaluate with --evaluate");
  if (assembly.generates)
    diag.error(config.where(find_table(config.root(), "generate")),
               "a config with [generate] generates; remove the [generate] section to evaluate with --evaluate");
}

void check_splits(const Config& config, const Assembly& assembly, Diagnostics& diag) {
  const data::DataKeys keys = data_keys(assembly);
  const std::string where = config.where(find_table(config.root(), "data"));
  try {
    if (data::split_given(keys, data::Split::kValid) || data::split_given(keys, data::Split::kTest)) return;
  } catch (const std::exception& e) {
    return diag.error(where, std::string("data.split: ") + e.what());
  }
  if (!keys.train_paths.empty())
    return diag.error(where, "--evaluate: nothing to evaluate: data.valid_paths and data.test_paths are empty "
                             "(data.train_paths is not evaluated); name the datasets to evaluate in "
                             "data.valid_paths or data.test_paths");
  diag.error(where, "--evaluate: nothing to evaluate: data.split = \"" + keys.split +
                        "\" gives the valid and test splits no weight; give one a weight (e.g. data.split = "
                        "\"98,2,0\") or name whole datasets in data.valid_paths or data.test_paths");
}

}  // namespace

void check_evaluation(const Config& config, const Assembly& assembly, const OtherModes& other, Diagnostics& diag) {
  check_modes(config, assembly, other, diag);
  check_splits(config, assembly, diag);
}

}  // namespace mh
