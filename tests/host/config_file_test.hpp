// A test that runs megahost on a config file it writes.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "data/temp_dir.hpp"
#include "megahost_process.hpp"

namespace mh::host::testing {

class ConfigFileTest : public ::testing::Test {
 protected:
  // megahost on `toml` (written to run.toml) with command-line `overrides`.
  Outcome run(const std::string& toml, const std::vector<std::string>& overrides = {}) {
    config_ = dir_.write("run.toml", toml);
    std::vector<std::string> args{"--config", config_};
    args.insert(args.end(), overrides.begin(), overrides.end());
    return run_megahost(args);
  }

  mh::data::testing::TempDir dir_;
  std::string config_;  // the path of the last config written
};

}  // namespace mh::host::testing
