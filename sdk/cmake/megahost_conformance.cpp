// megahost_conformance <plugin file> <kernels|comm> <component> [option=value ...]
// Runs megahost/conformance.hpp's checks on one component of a plugin and
// prints each failure; exit status 0 when it conforms, 1 when a check
// failed, 2 on bad arguments or a plugin that does not load.
#include <megahost/conformance.hpp>

#include <cstdio>
#include <string>
#include <vector>

int main(int argc, char** argv) {
  if (argc < 4 || (std::string(argv[2]) != "kernels" && std::string(argv[2]) != "comm")) {
    std::fprintf(stderr, "usage: %s <plugin file> <kernels|comm> <component> [option=value ...]\n", argv[0]);
    return 2;
  }
  const bool kernels = std::string(argv[2]) == "kernels";
  std::vector<std::string> failures;
  try {
    const MH_ComponentDesc& c = mh::conformance::load_component(argv[1], kernels ? MH_KIND_KERNELS : MH_KIND_COMM, argv[3]);
    const mh::conformance::ComponentOptions options(c, std::vector<std::string>(argv + 4, argv + argc));
    failures = kernels ? mh::conformance::check_kernels(c, options.get()) : mh::conformance::check_comm(c, options.get());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 2;
  }
  for (const auto& f : failures) std::fprintf(stderr, "FAILED %s\n", f.c_str());
  std::printf("%s %s '%s': %zu checks failed\n", argv[1], argv[2], argv[3], failures.size());
  return failures.empty() ? 0 : 1;
}
