#include "run.hpp"

#include <iostream>

namespace mh {

int run(const Assembly& assembly, const Config& config, const RunFlags&) {
  std::cout << "assembled from " << config.file() << ":\n" << assembly.describe();
  return 0;
}

}  // namespace mh
