// megahost --calibrate: measures this machine through the configured
// kernels and comm components -- GEMM rates over a grid of shapes, the rate
// of every memory-bound op, collective latency and bandwidth -- each with
// 1, 2 and 4 ranks sharing the machine at once, as a threads run shares it
// (and the kernels with half and one of them computing, as in a pipeline's
// fill and drain), and writes the hardware profile the tuner's cost model reads
// (configs/hardware/local_cpu.toml).
#pragma once

#include <span>
#include <string>

#include "config/config.hpp"
#include "plugins/registry.hpp"

namespace mh {

// Returns the exit status; throws mh::Error on failure.
int calibrate(const Config& config, const Registry& registry, const std::string& out_file);

// The bus bandwidth, bytes/s, of a collective whose latency was measured:
// the least-squares slope of seconds - latency over bus bytes (message
// bytes times the ring factor), through the origin.
double fitted_bus_bandwidth(double latency, std::span<const double> bus_bytes, std::span<const double> seconds);

}  // namespace mh
