#include "cli/command_line.hpp"

#include <fcntl.h>
#include <gflags/gflags.h>
#include <unistd.h>

#include <cerrno>
#include <iostream>
#include <string>
#include <vector>

#include "config/diagnostics.hpp"

namespace mh {
namespace {

constexpr int kExitBadInput = 2;

// "name" of "--name=value", "-name" or "--noname" (a boolean's negation).
std::string flag_name(const std::string& arg) {
  std::string name = arg.substr(arg.find_first_not_of('-'));
  return name.substr(0, name.find('='));
}

bool is_defined(const std::string& name) {
  gflags::CommandLineFlagInfo info;
  if (gflags::GetCommandLineFlagInfo(name.c_str(), &info)) return true;
  return name.rfind("no", 0) == 0 && gflags::GetCommandLineFlagInfo(name.substr(2).c_str(), &info) &&
         info.type == "bool";
}

std::vector<std::string> flag_names() {
  std::vector<gflags::CommandLineFlagInfo> all;
  gflags::GetAllFlags(&all);
  std::vector<std::string> names;
  for (const auto& flag : all) names.push_back(flag.name);
  return names;
}

// Megahost's own flags are the ones main.cpp defines; glog adds about a
// hundred that only --helpfull shows.
int show_help(const char* argv0) {
  gflags::ShowUsageWithFlagsRestrict(argv0, "host/cli/main.cpp");
  std::cout << "\n  section.key=value    override any key of the run's TOML (docs/config.md)\n"
            << "\nLogging flags (glog: -v, --logtostderr, ...): megahost --helpfull\n";
  return 0;
}

// --calibrate takes the calibration's name, quick or full, as its own word
// or after '='; a bare --calibrate (the flag's older form) is the full one.
void default_calibration(int argc, char** argv) {
  static char full[] = "--calibrate=full";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return;
    if (arg != "--calibrate" && arg != "-calibrate") continue;
    const std::string next = i + 1 < argc ? argv[i + 1] : "";
    if (next != "quick" && next != "full") argv[i] = full;
  }
}

}  // namespace

void keep_standard_streams_open() {
  for (int fd = 0; fd <= 2; ++fd)
    if (fcntl(fd, F_GETFD) == -1 && errno == EBADF) open("/dev/null", O_RDWR);  // takes the lowest free number: fd
}

std::optional<int> parse_command_line(int& argc, char**& argv) {
  Diagnostics diag;
  const std::vector<std::string> known = flag_names();
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.size() < 2 || arg[0] != '-') continue;
    if (arg == "--help" || arg == "-help" || arg == "-h") return show_help(argv[0]);
    if (std::string name = flag_name(arg); !is_defined(name)) {
      std::string hint = did_you_mean(name, known);
      diag.error("command line", "unknown flag '" + arg + "'" + (hint.empty() ? "" : "; " + hint) +
                                     " (megahost --help lists the flags)");
    }
  }
  if (diag.has_errors()) {
    std::cerr << diag.report() << diag.error_count() << " problem(s); nothing was run\n";
    return kExitBadInput;
  }
  default_calibration(argc, argv);
  gflags::ParseCommandLineFlags(&argc, &argv, true);
  return std::nullopt;
}

}  // namespace mh
