// What the CPU kernels need to know about the machine they run on.
#pragma once

#include <cstdint>
#include <string>

namespace mh::kernels::cpu {

// Physical cores this process may run on: the CPUs of its affinity mask
// (taskset, cgroup cpusets), counting SMT siblings once. At least 1.
int physical_cores();

// "AMD EPYC 7B13", or "unknown CPU".
std::string cpu_model();

// Installed memory, 0 if unknown.
uint64_t physical_memory_bytes();

}  // namespace mh::kernels::cpu
