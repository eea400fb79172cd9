// Runs the real megahost binary on a small model under a given layout
// (threads or mpiexec) and reads back what the equivalence tests compare:
// the per-step losses from the metrics and the full gradients of the last step.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace mh::test {

// The final metrics record's memory: each rank's measured peaks and the
// activation formula's values, in bytes.
struct MemoryRecord {
  std::vector<double> activations, optimizer, params, grads, total;
  double formula_per_layer = 0, formula_total = 0;
};

struct LayoutResult {
  int exit_code = -1;
  std::string log;
  std::vector<double> losses, val_losses;
  std::map<std::string, std::vector<float>> grads;
  MemoryRecord memory;
  std::string metrics;  // the metrics file: JSON lines
};

// The values of `key` in the metrics records that have it, in order.
std::vector<double> series(const LayoutResult& r, const char* key);

// `ranks` > 0 with mpi = true launches that many processes under mpiexec.
LayoutResult run_layout(const std::string& overrides, bool mpi = false, int ranks = 0);

// Largest |a - b| over the tensor, relative to the largest |b|.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b);

// Expects `r` to compute the function of `ref`, a successful run: each
// step's loss (and a mixture of experts' load-balancing loss) within 1e-5
// relative and, with `grads`, every gathered gradient of the last step
// within 1e-4.
void expect_same_function(const LayoutResult& ref, const LayoutResult& r, bool grads);

}  // namespace mh::test
