// The tuner_grid plugin: one component, tuner "grid".
#include "grid_tuner.hpp"

MH_PLUGIN("tuner_grid", "0.1.0",
          mh::component<mh::tuner::GridTuner>("grid", "0.1.0",
                                              "grid search priced by a calibrated cost model, memory from dry runs, "
                                              "best candidates measured",
                                              std::span<const MH_OptionSpec>(mh::tuner::GridTuner::kOptions,
                                                                             mh::tuner::GridTuner::kNumOptions)))
