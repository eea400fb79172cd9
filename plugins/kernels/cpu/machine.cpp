#include "machine.hpp"

#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <set>
#include <thread>
#include <utility>

namespace mh::kernels::cpu {
namespace {

int read_int(const std::string& path) {
  std::ifstream in(path);
  int value = -1;
  in >> value;
  return value;
}

// f32 FLOPs a core issues per cycle: two FMA units (Intel since Haswell,
// AMD since Zen 2; Xeon Bronze/Silver have one 512-bit unit, which this
// overstates by half) on the widest vectors the CPU has, two FLOPs per lane
// each; without FMA, one multiply and one add port.
double flops_per_cycle() {
  const int lanes = __builtin_cpu_supports("avx512f") ? 16 : __builtin_cpu_supports("avx2") ? 8 : 4;
  return (__builtin_cpu_supports("fma") ? 2 * 2 : 2) * lanes;
}

// cpufreq's maximum, else the largest "cpu MHz" of /proc/cpuinfo (virtual
// machines often have no cpufreq); Hz, 0 if unknown.
double clock_hz() {
  if (const int khz = read_int("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq"); khz > 0) return khz * 1e3;
  std::ifstream in("/proc/cpuinfo");
  double mhz = 0;
  for (std::string line; std::getline(in, line);)
    if (line.rfind("cpu MHz", 0) == 0 && line.find(':') != std::string::npos)
      mhz = std::max(mhz, std::strtod(line.c_str() + line.find(':') + 1, nullptr));
  return mhz * 1e6;
}

}  // namespace

double theoretical_peak_flops(int cores) { return cores * flops_per_cycle() * clock_hz(); }

int physical_cores() {
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) != 0) return std::max(1u, std::thread::hardware_concurrency());
  std::set<std::pair<int, int>> cores;  // (package, core)
  int cpus = 0;
  bool topology_known = true;  // false without sysfs: then count CPUs
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &mask)) continue;
    ++cpus;
    const std::string topology = "/sys/devices/system/cpu/cpu" + std::to_string(cpu) + "/topology/";
    const int package = read_int(topology + "physical_package_id"), core = read_int(topology + "core_id");
    topology_known = topology_known && package >= 0 && core >= 0;
    cores.emplace(package, core);
  }
  return std::max(1, topology_known ? static_cast<int>(cores.size()) : cpus);
}

std::string cpu_model() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) != 0) continue;
    const size_t colon = line.find(':');
    if (colon != std::string::npos && colon + 2 <= line.size()) return line.substr(colon + 2);
  }
  return "unknown CPU";
}

uint64_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : 0;
}

}  // namespace mh::kernels::cpu
