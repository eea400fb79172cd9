#include "megahost_run.hpp"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <system_error>
#include <vector>

#include <nlohmann/json.hpp>

#include "support/process.hpp"
#include "support/files.hpp"

namespace mh::ckpt::test {
namespace fs = std::filesystem;
namespace {

int64_t last_step(const fs::path& metrics) {
  int64_t step = 0;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) step = j["step"].get<int64_t>();
  }
  return step;
}

// The process's scratch folders, removed as it exits: a suite's shared files
// and a test that stops half-way leave nothing behind in TMPDIR.
class ScratchFolders {
 public:
  ~ScratchFolders() {
    std::error_code ignored;
    for (const fs::path& p : paths_) fs::remove_all(p, ignored);
  }
  void add(const fs::path& p) { paths_.push_back(p); }

 private:
  std::vector<fs::path> paths_;
};

}  // namespace

std::string scratch_dir(const std::string& name) {
  static ScratchFolders folders;
  const fs::path p = fs::temp_directory_path() / ("megahost_ckpt_" + std::to_string(getpid()) + "_" + name);
  fs::remove_all(p);
  fs::create_directories(p);
  folders.add(p);
  return p.string();
}

Outcome run_megahost(const std::vector<std::string>& args, const Interrupt& interrupt,
                     const std::vector<std::string>& launcher) {
  static int counter = 0;
  const fs::path work = scratch_dir("run" + std::to_string(counter++));
  const fs::path metrics = work / "metrics.jsonl";
  mh::test::ProcessSpec spec;
  spec.argv = launcher;
  for (const std::string& a : {std::string(MEGAHOST_TEST_BINARY), std::string("--config"),
                               std::string(MEGAHOST_TEST_CONFIG), std::string("--metrics_out"), metrics.string()})
    spec.argv.push_back(a);
  spec.argv.insert(spec.argv.end(), args.begin(), args.end());
  spec.set_env = mh::test::mpi_environment();
  spec.set_env.push_back("OPENBLAS_NUM_THREADS=1");
  if (!interrupt.failpoint.empty()) spec.set_env.push_back("MEGAHOST_FAILPOINT=" + interrupt.failpoint);
  spec.unset_prefix = {"MEGAHOST_"};
  spec.stderr_to_stdout = true;
  spec.interrupt = {interrupt.signal, [&] { return last_step(metrics) >= interrupt.after_step; }};
  const mh::test::ProcessExit exit = mh::test::run_process(spec);

  Outcome r;
  r.status = exit.status;
  r.signal = exit.signal;
  r.log = exit.out;
  std::ifstream in(metrics);
  for (std::string line; std::getline(in, line);) {
    r.records.push_back(line);
    auto j = nlohmann::json::parse(line, nullptr, false);
    if (!j.is_discarded() && j.contains("loss")) r.losses[j["step"].get<int64_t>()] = j["loss"].get<double>();
  }
  fs::remove_all(work);
  return r;
}

std::map<std::string, std::string> rank_files(const std::string& dir) {
  std::map<std::string, std::string> files;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".safetensors") files[e.path().filename().string()] = mh::test::file_bytes(e.path());
  return files;
}

}  // namespace mh::ckpt::test
