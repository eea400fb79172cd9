#include "tuner/hardware_profile.hpp"

#include <megahost/error.hpp>
#include <megahost/options.hpp>

#include <fstream>
#include <iomanip>

#include "data/share_dir.hpp"
#include "report/replaced_file.hpp"

namespace mh {
namespace fs = std::filesystem;
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

const MH_OptionSpec kTop[] = {
    opt("name", MH_VALUE_STRING, nullptr, "profile name"),
    opt("device", MH_VALUE_STRING, nullptr, "the device, as its vendor names it"),
    opt_choice("calibrated", "\"none\"", "none|quick|full",
               "how megahost --calibrate measured it; none for a profile from published measurements or written by hand"),
    opt_choice("dtype", "\"bf16\"", "f32|bf16|f16", "dtype the engine computes in on this device"),
    opt_int("devices_per_node", "8", 1, 4096, "devices (GPUs) of one node; ranks of the process on a CPU"),
    opt_bool("shared_device", "false", "true when every rank of a node shares one device (a CPU)"),
    opt_double("peak_gflops", nullptr, 1e-6, 1e12, "dense peak of one device in dtype, GFLOP/s (for MFU)"),
    opt_double("memory_gib", nullptr, 1e-6, 1e9, "memory of one device, GiB"),
};
const MH_OptionSpec kGemm[] = {
    opt_int("ranks", "1", 1, 4096, "ranks sharing the device while measured"),
    opt_int("busy", "0", 0, 4096, "of those, ranks computing while measured; 0: all of them"),
    opt_int("batch", "1", 1, 1e9, "products in the batch"),
    opt_int("m", nullptr, 1, 1e9, "rows of the product"),
    opt_int("n", nullptr, 1, 1e9, "columns of the product"),
    opt_int("k", nullptr, 1, 1e9, "inner dimension"),
    opt_double("gflops", nullptr, 1e-9, 1e12, "achieved GFLOP/s, 2*batch*m*n*k / time"),
};
const MH_OptionSpec kVector[] = {
    opt("op", MH_VALUE_STRING, nullptr, "the kernels op: softmax, dropout, layernorm, ..."),
    opt_int("ranks", "1", 1, 4096, "ranks sharing the device while measured"),
    opt_int("busy", "0", 0, 4096, "of those, ranks computing while measured; 0: all of them"),
    opt_int("elements", "0", 0, 1e15, "elements of the measured call; 0: any size"),
    opt_double("bytes_per_element", nullptr, 1e-9, 1e9, "bytes the op moves per element"),
    opt_double("gbs", nullptr, 1e-9, 1e9, "achieved GB/s (1e9 bytes) at that traffic"),
};
const MH_OptionSpec kCollective[] = {
    opt_choice("level", nullptr, "intra|inter", "intra: inside a node (NVLink, shared memory); inter: between nodes"),
    opt_int("ranks", "0", 0, 1e6, "group size measured at; 0: any"),
    opt_choice("op", "\"any\"", "any|all_reduce|all_gather|reduce_scatter|all_to_all|send_recv", "collective"),
    opt_double("latency_us", nullptr, 0, 1e9, "time of an empty collective, microseconds"),
    opt_double("busbw_gbs", nullptr, 1e-9, 1e9, "bus bandwidth, GB/s (nccl-tests' busbw)"),
};

int32_t parse_dtype(const std::string& d) { return d == "bf16" ? MH_BF16 : d == "f16" ? MH_F16 : MH_F32; }
const char* dtype_text(int32_t d) { return d == MH_BF16 ? "bf16" : d == MH_F16 ? "f16" : "f32"; }
std::string busy_line(int32_t busy) { return busy > 0 ? "\nbusy = " + std::to_string(busy) : ""; }

// Validates each table of the array `key` with `specs` and hands the values
// of each sound one on.
template <class F>
void each_entry(const Config& file, const char* key, std::span<const MH_OptionSpec> specs, Diagnostics& diag, F&& f) {
  const toml::node* node = file.root().get(key);
  if (node == nullptr) return;
  const toml::array* array = node->as_array();
  if (array == nullptr || !array->is_array_of_tables()) {
    diag.error(file.where(*node), std::string("'") + key + "' must be an array of tables ([[" + key + "]])");
    return;
  }
  for (const auto& item : *array) {
    const size_t errors = diag.error_count();
    const OptionValues values = validate_section(file, item.as_table(), key, specs, {}, diag);
    if (diag.error_count() == errors) f(values.options(), item);
  }
}

// busy counts ranks among `ranks`.
void check_busy(const Config& file, const Options& o, const toml::node& item, Diagnostics& diag) {
  if (o.get_int("busy") > o.get_int("ranks"))
    diag.error(file.where(item), "busy = " + std::to_string(o.get_int("busy")) + " exceeds ranks = " +
                                     std::to_string(o.get_int("ranks")) + "; busy counts the computing ranks among them");
}

void read_top(const Options& top, HardwareProfile& p) {
  p.name = top.get_string("name");
  p.device = top.get_string("device");
  if (const std::string how = top.get_string("calibrated"); how != "none") p.calibrated = how;
  p.dtype = parse_dtype(top.get_string("dtype"));
  p.devices_per_node = int32_t(top.get_int("devices_per_node"));
  p.shared_device = top.get_bool("shared_device");
  p.peak_flops = top.get_double("peak_gflops") * 1e9;
  p.memory_bytes = uint64_t(top.get_double("memory_gib") * kGiB);
}

HardwareProfile read_profile(const Config& file, Diagnostics& diag) {
  HardwareProfile p;
  p.file = file.file();
  const size_t errors = diag.error_count();
  const OptionValues top = validate_section(file, &file.root(), "hardware", kTop, {"gemm", "vector", "collective"}, diag);
  if (diag.error_count() == errors) read_top(top.options(), p);
  each_entry(file, "gemm", kGemm, diag, [&](const Options& o, const toml::node& item) {
    check_busy(file, o, item, diag);
    p.gemm.push_back(MH_GemmRate{int32_t(o.get_int("ranks")), int32_t(o.get_int("busy")), o.get_int("batch"), o.get_int("m"), o.get_int("n"),
                                 o.get_int("k"), o.get_double("gflops") * 1e9});
  });
  each_entry(file, "vector", kVector, diag, [&](const Options& o, const toml::node& item) {
    check_busy(file, o, item, diag);
    p.vector.push_back({o.get_string("op"), int32_t(o.get_int("ranks")), int32_t(o.get_int("busy")), o.get_int("elements"),
                        o.get_double("bytes_per_element"), o.get_double("gbs") * 1e9});
  });
  each_entry(file, "collective", kCollective, diag, [&](const Options& o, const toml::node&) {
    const int32_t level = o.get_string("level") == "inter" ? MH_LINK_INTER_NODE : MH_LINK_INTRA_NODE;
    p.collectives.push_back({level, int32_t(o.get_int("ranks")), o.get_string("op"), o.get_double("latency_us") * 1e-6,
                             o.get_double("busbw_gbs") * 1e9});
  });
  return p;
}

}  // namespace

const MH_Hardware& HardwareProfile::view() const {
  vector_view_.clear();
  for (const auto& v : vector)
    vector_view_.push_back(MH_VectorRate{v.op.c_str(), v.ranks, v.busy, v.elements, v.bytes_per_element, v.bytes_per_s});
  collective_view_.clear();
  for (const auto& c : collectives)
    collective_view_.push_back(MH_CollectiveRate{c.level, c.ranks, c.op.c_str(), c.latency_s, c.bus_bytes_per_s});
  view_ = MH_Hardware{sizeof(MH_Hardware), name.c_str(),        device.c_str(),     dtype,
                      devices_per_node,    shared_device ? 1 : 0, 0,                peak_flops,
                      memory_bytes,        gemm.data(),          gemm.size(),        vector_view_.data(),
                      vector_view_.size(), collective_view_.data(), collective_view_.size()};
  return view_;
}

fs::path user_hardware_dir() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg != nullptr && *xdg != '\0')
    return fs::path(xdg) / "megahost" / "hardware";
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0')
    return fs::path(home) / ".config" / "megahost" / "hardware";
  return {};
}

std::vector<fs::path> hardware_search_path(const Config& config) {
  std::vector<fs::path> dirs{config.resolve("hardware")};
  if (fs::path user = user_hardware_dir(); !user.empty()) dirs.push_back(user);
  dirs.push_back(share_dir() / "hardware");
  return dirs;
}

std::optional<HardwareProfile> load_hardware_profile(const std::string& name_or_file, const std::vector<fs::path>& dirs,
                                                     Diagnostics& diag) {
  fs::path file(name_or_file);
  const bool is_name = file.extension() != ".toml" && !fs::exists(file);
  std::string searched;
  for (const auto& dir : dirs) {
    if (!is_name) break;
    searched += (searched.empty() ? "" : ", ") + dir.string();
    if (fs::exists(dir / (name_or_file + ".toml"))) {
      file = dir / (name_or_file + ".toml");
      break;
    }
  }
  if (!fs::exists(file)) {
    diag.error("tuner.cluster", "no hardware profile '" + name_or_file + "'" +
                                    (is_name ? " in " + searched : "") +
                                    "; name one of configs/hardware (dgx_a100_80gb, dgx_h100, dgx_h200, local_cpu "
                                    "after megahost --calibrate) or give a .toml file");
    return std::nullopt;
  }
  std::optional<Config> toml = Config::load(file.string(), {}, diag);
  if (!toml) return std::nullopt;
  HardwareProfile p = read_profile(*toml, diag);
  if (diag.has_errors()) return std::nullopt;
  return p;
}

void write_hardware_profile(const HardwareProfile& p, const fs::path& file, const std::string& comment) {
  std::error_code ec;
  if (file.has_parent_path()) fs::create_directories(file.parent_path(), ec);
  ReplacedFile replaced(file.string());
  std::ofstream& out = replaced.out();
  out << std::setprecision(6) << comment;
  out << "name = \"" << p.name << "\"\ndevice = \"" << p.device << "\"\n";
  if (!p.calibrated.empty()) out << "calibrated = \"" << p.calibrated << "\"\n";
  out << "dtype = \"" << dtype_text(p.dtype)
      << "\"\ndevices_per_node = " << p.devices_per_node << "\nshared_device = " << (p.shared_device ? "true" : "false")
      << "\npeak_gflops = " << p.peak_flops / 1e9 << "\nmemory_gib = " << double(p.memory_bytes) / kGiB << "\n";
  for (const auto& g : p.gemm)
    out << "\n[[gemm]]\nranks = " << g.ranks << busy_line(g.busy) << "\nbatch = " << g.batch << "\nm = " << g.m << "\nn = " << g.n
        << "\nk = " << g.k << "\ngflops = " << g.flops_per_s / 1e9 << "\n";
  for (const auto& v : p.vector)
    out << "\n[[vector]]\nop = \"" << v.op << "\"\nranks = " << v.ranks << busy_line(v.busy) << "\nelements = " << v.elements
        << "\nbytes_per_element = " << v.bytes_per_element
        << "\ngbs = " << v.bytes_per_s / 1e9 << "\n";
  for (const auto& c : p.collectives)
    out << "\n[[collective]]\nlevel = \"" << (c.level == MH_LINK_INTER_NODE ? "inter" : "intra") << "\"\nranks = " << c.ranks
        << "\nop = \"" << c.op << "\"\nlatency_us = " << c.latency_s * 1e6 << "\nbusbw_gbs = " << c.bus_bytes_per_s / 1e9 << "\n";
  replaced.commit();
}

}  // namespace mh
