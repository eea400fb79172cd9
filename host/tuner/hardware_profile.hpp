// Hardware profiles (configs/hardware/NAME.toml): what the tuner's cost
// model knows of a machine -- peak, memory, achieved GEMM rates by shape,
// memory-bound op rates, collective latency and bandwidth by link level.
// The host loads and validates them (every problem with file:line:col) and
// hands them to the tuner as MH_Hardware; megahost --calibrate writes one.
// docs/tuner.md describes the format.
#pragma once

#include <megahost/abi.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "config/config.hpp"
#include "config/diagnostics.hpp"

namespace mh {

struct HardwareProfile {
  struct Vector {
    std::string op;
    int32_t ranks, busy;
    int64_t elements;
    double bytes_per_element, bytes_per_s;
  };
  struct Collective {
    int32_t level, ranks;
    std::string op;
    double latency_s, bus_bytes_per_s;
  };

  std::string name, device, file;
  // How --calibrate measured this machine ("quick" or "full"); empty for a
  // profile written by hand or from published measurements.
  std::string calibrated;
  int32_t dtype = MH_F32;
  int32_t devices_per_node = 1;
  bool shared_device = false;
  double peak_flops = 0;
  uint64_t memory_bytes = 0;
  std::vector<MH_GemmRate> gemm;
  std::vector<Vector> vector;
  std::vector<Collective> collectives;

  // A view for the ABI; valid while this profile lives and is not changed.
  const MH_Hardware& view() const;

 private:
  mutable std::vector<MH_VectorRate> vector_view_;
  mutable std::vector<MH_CollectiveRate> collective_view_;
  mutable MH_Hardware view_{};
};

// The user's profiles, where --calibrate writes by default:
// $XDG_CONFIG_HOME/megahost/hardware, else ~/.config/megahost/hardware;
// empty when neither variable is set.
std::filesystem::path user_hardware_dir();

// Folders searched for a profile given by name, in order: hardware/ next
// to the config, the user's folder, then the shipped configs/hardware.
std::vector<std::filesystem::path> hardware_search_path(const Config& config);

// `name_or_file` is a path to a TOML file, or NAME for NAME.toml in `dirs`.
std::optional<HardwareProfile> load_hardware_profile(const std::string& name_or_file,
                                                     const std::vector<std::filesystem::path>& dirs,
                                                     Diagnostics& diag);

// Writes `profile` as TOML that load_hardware_profile reads back unchanged;
// `comment` lines head the file.
void write_hardware_profile(const HardwareProfile& profile, const std::filesystem::path& file,
                            const std::string& comment);

}  // namespace mh
