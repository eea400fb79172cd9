// Builds what the engine needs in-process for a test: the plugins of the
// build tree, a config from TOML text, the assembled pipeline.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugins/assembly.hpp"
#include "config/config.hpp"
#include "plugins/plugin_loader.hpp"
#include "plugins/registry.hpp"

namespace mh::test {

class EngineEnv {
 public:
  // `more_plugin_dirs` are searched after the built plugins (fixtures).
  explicit EngineEnv(const std::string& toml, const std::vector<std::string>& overrides = {},
                     const std::vector<std::filesystem::path>& more_plugin_dirs = {}) {
    std::vector<std::filesystem::path> dirs{MEGAHOST_TEST_PLUGIN_DIR};
    dirs.insert(dirs.end(), more_plugin_dirs.begin(), more_plugin_dirs.end());
    plugins_ = load_plugins(dirs, diag_);
    registry_ = std::make_unique<Registry>(plugins_, diag_);
    path_ = std::filesystem::temp_directory_path() /
            ("megahost_test_" + std::to_string(::getpid()) + "_" + std::to_string(counter()++) + ".toml");
    std::ofstream(path_) << toml;
    config_ = Config::load(path_.string(), overrides, diag_);
    if (config_) assembly_ = assemble(*config_, *registry_, diag_);
    EXPECT_FALSE(diag_.has_errors()) << diag_.report();
  }
  ~EngineEnv() { std::filesystem::remove(path_); }

  const Assembly& assembly() const { return *assembly_; }
  const Config& config() const { return *config_; }
  const Slot& slot(int32_t kind) const { return *assembly_->slot(kind); }

 private:
  static int& counter() {
    static int n = 0;
    return n;
  }
  Diagnostics diag_;
  std::vector<LoadedPlugin> plugins_;
  std::unique_ptr<Registry> registry_;
  std::filesystem::path path_;
  std::optional<Config> config_;
  std::optional<Assembly> assembly_;
};

}  // namespace mh::test
