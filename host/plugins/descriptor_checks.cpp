#include "plugins/descriptor_checks.hpp"

#include <megahost/options.hpp>
#include <megahost/struct_size.hpp>

#include <cstring>

#include "config/config.hpp"

namespace mh {

int first_null_entry(const void* table, size_t first, size_t bytes) {
  using Fn = void (*)();
  const char* base = static_cast<const char*>(table) + first;
  for (size_t at = 0; first + at + sizeof(Fn) <= bytes; at += sizeof(Fn)) {
    Fn fn;
    std::memcpy(&fn, base + at, sizeof(Fn));
    if (fn == nullptr) return int(at / sizeof(Fn));
  }
  return -1;
}

std::string option_problem(const MH_OptionSpec& o) {
  if (o.struct_size < MH_STRUCT_SIZE(MH_OptionSpec, choices))
    return "is too small (struct_size " + std::to_string(o.struct_size) + ")";
  if (o.name == nullptr) return "has no name";
  // In this host's layout, so that nothing past the plugin's struct_size is read.
  MH_OptionSpec ours{};
  std::memcpy(&ours, &o, std::min(o.struct_size, sizeof(ours)));
  if (std::string problem = default_problem(ours); !problem.empty())
    return std::string("'").append(o.name).append("': ").append(problem);
  return "";
}

std::string stride_problem(const char* field, size_t stride, size_t largest) {
  if (stride % alignof(size_t) != 0)
    return "its " + std::string(field) + " " + std::to_string(stride) + " is not a multiple of " +
           std::to_string(alignof(size_t)) + " (it is sizeof of the struct)";
  if (stride < largest)
    return "its " + std::string(field) + " " + std::to_string(stride) + " is smaller than an element's struct_size " +
           std::to_string(largest) + ": the elements would overlap";
  return "";
}

std::string options_problem(const MH_OptionSpec* options, size_t count, size_t stride) {
  if (std::string problem = stride_problem("option_size", stride, largest_struct_size(options, stride, count));
      !problem.empty())
    return ": " + problem;
  for (size_t o = 0; o < count; ++o)
    if (std::string problem = option_problem(element(options, stride, o)); !problem.empty())
      return ": option #" + std::to_string(o) + " " + problem;
  return "";
}

}  // namespace mh
