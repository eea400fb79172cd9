#include "data/split.hpp"

#include <megahost/error.hpp>

#include <array>
#include <charconv>
#include <cmath>
#include <string>

namespace mh::data {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

[[noreturn]] void bad_weights(std::string_view weights, const std::string& what) {
  throw Error(MH_INVALID_ARGUMENT,
              "data split \"" + std::string(weights) + "\": " + what +
                  "; give up to three non-negative weights for train,valid,test, e.g. \"98,2,0\"");
}

std::array<double, 3> parse_weights(std::string_view weights) {
  std::array<double, 3> parsed{};
  size_t count = 0;
  for (std::string_view rest = weights;;) {
    size_t cut = rest.find_first_of(",/");
    std::string_view field = trim(rest.substr(0, cut));
    if (count == parsed.size()) bad_weights(weights, "more than three weights");
    double& w = parsed[count++];
    auto [end, ec] = std::from_chars(field.data(), field.data() + field.size(), w);
    if (field.empty() || ec != std::errc() || end != field.data() + field.size()) {
      // Built piecewise: GCC 12 warns falsely (-Wrestrict) on "'" + std::string.
      std::string what = "'";
      what.append(field).append("' is not a number");
      bad_weights(weights, what);
    }
    if (!(w >= 0) || !std::isfinite(w)) bad_weights(weights, "weights must be non-negative");
    if (cut == std::string_view::npos) break;
    rest.remove_prefix(cut + 1);
  }
  if (parsed[0] + parsed[1] + parsed[2] <= 0) bad_weights(weights, "the weights sum to zero");
  return parsed;
}

}  // namespace

std::string_view split_name(Split split) {
  switch (split) {
    case Split::kTrain: return "train";
    case Split::kValid: return "valid";
    case Split::kTest: return "test";
  }
  return "unknown";
}

DocumentRange split_documents(std::string_view weights, Split split, int64_t documents) {
  std::array<double, 3> w = parse_weights(weights);
  const double total = w[0] + w[1] + w[2];
  const auto i = static_cast<size_t>(split);
  double before = 0;
  for (size_t j = 0; j < i; ++j) before += w[j] / total;
  const double through = before + w[i] / total;
  // nearbyint rounds ties to even in the default rounding mode, like Python.
  auto bound = [documents](double fraction) {
    return static_cast<int64_t>(std::nearbyint(fraction * static_cast<double>(documents)));
  };
  return {bound(before), bound(through)};
}

bool split_weighted(std::string_view weights, Split split) {
  return parse_weights(weights)[static_cast<size_t>(split)] > 0;
}

}  // namespace mh::data
