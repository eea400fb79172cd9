#include "layout_run.hpp"

#include "support/process.hpp"

#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>
#include "support/files.hpp"

namespace mh::test {
namespace fs = std::filesystem;
namespace {

MemoryRecord read_memory(const fs::path& metrics) {
  MemoryRecord m;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (!j.contains("final")) continue;
    m.formula_per_layer = j["activations_formula_per_layer"].get<double>();
    for (const auto& rank : j["memory"]) {
      m.activations.push_back(rank["activations"].get<double>());
      m.optimizer.push_back(rank["optimizer"].get<double>());
      m.params.push_back(rank["params"].get<double>());
      m.grads.push_back(rank["grads"].get<double>());
      m.total.push_back(rank["total"].get<double>());
      m.formula_total = rank["activations_formula"].get<double>();
    }
  }
  return m;
}

std::map<std::string, std::vector<float>> read_grads(const fs::path& dump) {
  std::map<std::string, std::vector<float>> grads;
  std::ifstream in(dump, std::ios::binary);
  uint32_t len = 0;
  while (in.read(reinterpret_cast<char*>(&len), sizeof len)) {
    std::string name(len, '\0');
    uint64_t n = 0;
    in.read(name.data(), len);
    in.read(reinterpret_cast<char*>(&n), sizeof n);
    std::vector<float> v(n);
    in.read(reinterpret_cast<char*>(v.data()), std::streamsize(n * sizeof(float)));
    grads[name] = std::move(v);
  }
  return grads;
}

}  // namespace

LayoutResult run_layout(const std::string& overrides, bool mpi, int ranks) {
  static int counter = 0;
  fs::path dir = fs::temp_directory_path() / ("megahost_layout_" + std::to_string(getpid()) + "_" + std::to_string(counter++));
  fs::create_directories(dir);
  // The overrides are shell words (a test may quote one with spaces).
  std::string cmd = "exec ";
  if (mpi)
    for (const std::string& word : mpi_launcher(ranks)) cmd += word + " ";
  cmd += std::string(MEGAHOST_TEST_BINARY) + " --config " + MEGAHOST_TEST_CONFIG + " --metrics_out " +
         (dir / "metrics.jsonl").string() + " --grads_out " + (dir / "grads.bin").string() + " " + overrides;
  ProcessSpec spec = shell(cmd);
  spec.set_env = {"OPENBLAS_NUM_THREADS=1"};
  if (mpi) spec.set_env = mpi_environment(), spec.set_env.push_back("OPENBLAS_NUM_THREADS=1");
  spec.stderr_to_stdout = true;
  const ProcessExit exit = run_process(spec);
  LayoutResult r;
  r.exit_code = exit.status;
  r.log = exit.out;
  r.metrics = mh::test::file_bytes(dir / "metrics.jsonl");
  r.losses = series(r, "loss");
  r.val_losses = series(r, "val_loss");
  // Pipeline stages each write their own parameters' gradients.
  for (const auto& entry : fs::directory_iterator(dir))
    if (entry.path().filename().string().rfind("grads.bin", 0) == 0) r.grads.merge(read_grads(entry.path()));
  r.memory = read_memory(dir / "metrics.jsonl");
  fs::remove_all(dir);
  return r;
}

std::vector<double> series(const LayoutResult& r, const char* key) {
  std::vector<double> values;
  std::istringstream in(r.metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line);
    if (j.contains(key)) values.push_back(j[key].get<double>());
  }
  return values;
}

double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
  double diff = 0, scale = 0;
  for (size_t i = 0; i < std::min(a.size(), b.size()); ++i) {
    diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
    scale = std::max(scale, std::fabs(double(b[i])));
  }
  return scale > 0 ? diff / scale : diff;
}

void expect_same_function(const LayoutResult& ref, const LayoutResult& r, bool grads) {
  ASSERT_EQ(r.exit_code, 0) << r.log;
  ASSERT_EQ(r.losses.size(), ref.losses.size()) << r.log;
  for (size_t i = 0; i < ref.losses.size(); ++i)
    EXPECT_NEAR(r.losses[i], ref.losses[i], 1e-5 * std::fabs(ref.losses[i])) << "step " << i + 1;
  // A mixture of experts' load-balancing loss, reported on its own: each
  // layout's partial statistics must add up to one rank's loss, once.
  const std::vector<double> aux = series(ref, "moe_aux_loss"), got = series(r, "moe_aux_loss");
  ASSERT_EQ(got.size(), aux.size()) << r.log;
  for (size_t i = 0; i < aux.size(); ++i)
    EXPECT_NEAR(got[i], aux[i], 1e-5 * std::fabs(aux[i])) << "moe_aux_loss, step " << i + 1;
  if (!grads) return;
  ASSERT_EQ(r.grads.size(), ref.grads.size());
  for (const auto& [name, g] : ref.grads) {
    ASSERT_EQ(r.grads.count(name), 1u) << name;
    ASSERT_EQ(r.grads.at(name).size(), g.size()) << name;
    EXPECT_LE(relative_difference(r.grads.at(name), g), 1e-4) << name;
  }
}

}  // namespace mh::test
