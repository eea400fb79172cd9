// Typed read access to the validated options a component receives.
#pragma once

#include <megahost/abi.h>
#include <megahost/error.hpp>

#include <cstdint>
#include <string>
#include <string_view>

namespace mh {

class Options {
 public:
  explicit Options(const MH_Options* raw) : raw_(raw) {}

  std::string section() const { return raw_ != nullptr && raw_->section ? raw_->section : ""; }
  bool has(std::string_view name) const { return find(name) != nullptr; }

  int64_t get_int(std::string_view name) const { return get(name, MH_VALUE_INT).value.i; }
  double get_double(std::string_view name) const { return get(name, MH_VALUE_DOUBLE).value.d; }
  bool get_bool(std::string_view name) const { return get(name, MH_VALUE_BOOL).value.b != 0; }
  std::string get_string(std::string_view name) const { return get(name, MH_VALUE_STRING).value.s; }

  // "section.name", as a user would write it in an error message.
  std::string key(std::string_view name) const { return section() + "." + std::string(name); }

 private:
  const MH_NamedValue* find(std::string_view name) const {
    if (raw_ == nullptr) return nullptr;
    for (size_t i = 0; i < raw_->count; ++i)
      if (name == raw_->values[i].name) return &raw_->values[i];
    return nullptr;
  }
  const MH_NamedValue& get(std::string_view name, MH_ValueType type) const {
    const MH_NamedValue* v = find(name);
    require(v != nullptr, "option '" + key(name) + "' is not declared by the component", MH_INTERNAL);
    require(v->type == type, "option '" + key(name) + "' read with the wrong type", MH_INTERNAL);
    return *v;
  }

  const MH_Options* raw_;
};

// Builders for MH_OptionSpec tables, so a component lists its options as
//   static const MH_OptionSpec kOptions[] = {mh::opt_int("size", "1", 1, 1024, "TP ranks"), ...};
inline constexpr MH_OptionSpec opt(const char* name, MH_ValueType type, const char* default_value,
                                   const char* doc, uint32_t flags = 0, double min = 0,
                                   double max = 0, const char* choices = nullptr) {
  return MH_OptionSpec{MH_STRUCT_SIZE(MH_OptionSpec, doc),
                       name,
                       type,
                       flags | (default_value == nullptr ? uint32_t{MH_OPTION_REQUIRED} : 0u),
                       default_value,
                       min,
                       max,
                       choices,
                       doc};
}
inline constexpr MH_OptionSpec opt_int(const char* name, const char* default_value, double min,
                                       double max, const char* doc) {
  return opt(name, MH_VALUE_INT, default_value, doc, MH_OPTION_HAS_MIN | MH_OPTION_HAS_MAX, min, max);
}
inline constexpr MH_OptionSpec opt_double(const char* name, const char* default_value, double min,
                                          double max, const char* doc) {
  return opt(name, MH_VALUE_DOUBLE, default_value, doc, MH_OPTION_HAS_MIN | MH_OPTION_HAS_MAX, min,
             max);
}
inline constexpr MH_OptionSpec opt_bool(const char* name, const char* default_value, const char* doc) {
  return opt(name, MH_VALUE_BOOL, default_value, doc);
}
inline constexpr MH_OptionSpec opt_choice(const char* name, const char* default_value,
                                          const char* choices, const char* doc) {
  return opt(name, MH_VALUE_STRING, default_value, doc, 0, 0, 0, choices);
}

}  // namespace mh
