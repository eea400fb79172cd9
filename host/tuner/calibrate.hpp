// megahost --calibrate [quick|full]: measures this machine through the
// configured kernels and comm components -- GEMM rates over a grid of shapes
// (a decode step's few rows among them), the rate of every memory-bound op
// in cache and streaming far beyond the last-level cache, the fixed cost of
// a kernels call, collective latency and bandwidth -- each with 1, 2 and 4
// ranks sharing the machine at once, as a threads run shares it (and the
// kernels with half and one of them computing, as in a pipeline's fill and
// drain), and writes the hardware profile the tuner's cost model reads
// (configs/hardware/local_cpu.toml). `quick` measures a coarser grid
// in about a minute; the tuner runs it by itself when a CPU profile was
// calibrated on another CPU.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "plugins/registry.hpp"
#include "tuner/hardware_profile.hpp"

namespace mh {

enum class CalibrationMode { kFull, kQuick };

// "full" or "quick"; throws mh::Error naming --calibrate for anything else.
CalibrationMode calibration_mode(const std::string& word);
const char* calibration_mode_name(CalibrationMode mode);

// Measures this machine. Throws mh::Error when the calibration disagrees
// with itself (the machine's load changed while it ran), so no profile is
// written from it.
HardwareProfile measure_this_machine(const Config& config, const Registry& registry, CalibrationMode mode);

// Measures and writes the profile; returns the exit status.
int calibrate(const Config& config, const Registry& registry, const std::string& out_file, CalibrationMode mode);

// The bus bandwidth, bytes/s, of a collective whose latency was measured:
// the least-squares slope of seconds - latency over bus bytes (message
// bytes times the ring factor), through the origin.
double fitted_bus_bandwidth(double latency, std::span<const double> bus_bytes, std::span<const double> seconds);

// The median of timings (seconds): a round's calls, a pass's rounds, a
// rate's interleaved passes over the whole grid.
double median_seconds(std::vector<double> seconds);
// Whether a rate's passes agree: two of them within kPassesAgree of each
// other, so their median lies with them. Other work on the machine slows a
// pass; passes that disagree are measured once more, and a calibration
// where many still disagree, or whose reference product drifted, is refused.
inline constexpr double kPassesAgree = 1.5;
bool passes_agree(std::span<const double> pass_seconds);

}  // namespace mh
