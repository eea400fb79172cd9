#include "megahost_process.hpp"

#include <megahost/abi.h>

#include <sstream>

#include "support/process.hpp"

namespace mh::host::testing {

Outcome run_megahost(const std::vector<std::string>& args) {
  mh::test::ProcessSpec spec;
  spec.argv = {MEGAHOST_TEST_BINARY};
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.unset_prefix = {"MEGAHOST_PLUGIN_PATH="};
  const mh::test::ProcessExit exit = mh::test::run_process(spec);
  return Outcome{exit.status, exit.out, exit.err};
}

std::vector<std::string> listed(const std::string& listing, const std::string& kind, const std::string& name) {
  std::istringstream lines(listing);
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> columns;
    for (std::string w; words >> w;) columns.push_back(w);
    if (columns.size() == 5 && columns[0] == kind && columns[1] == name) return columns;
  }
  return {};
}

std::string abi_version() { return std::to_string(MH_ABI_MAJOR) + "." + std::to_string(MH_ABI_MINOR); }

std::string fixture(const std::string& folder) { return std::string(MEGAHOST_TEST_FIXTURES) + "/" + folder; }

std::vector<std::string> tiny_run() {
  return {"model.layers=2",        "model.hidden=64",      "model.heads=2",
          "model.seq_len=32",      "train.global_batch=2", "train.micro_batch=2",
          "train.eval_interval=0", std::string("data.path=") + MEGAHOST_TEST_DATA};
}

}  // namespace mh::host::testing
