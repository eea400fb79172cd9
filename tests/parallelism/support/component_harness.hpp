// Test harness for planning components: creates an instance through its
// MH_ComponentDesc exactly as the host does (every declared option present,
// defaults taken from the option spec, a few overridden by the test) and
// calls it only through the kind's C function table.
#pragma once

#include <megahost/error.hpp>
#include <megahost/plugin.hpp>

#include <cstdint>
#include <deque>
#include <stdexcept>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace mh::testing {

using OptionValue = std::variant<bool, int64_t, double, std::string>;
using Overrides = std::vector<std::pair<std::string, OptionValue>>;

// "OK", or "INVALID_ARGUMENT: <message>"; frees the error.
inline std::string describe(MH_Error* raw) {
  if (raw == nullptr) return "OK";
  ErrorPtr e(raw);
  return std::string(code_name(e->code)) + ": " + e->message;
}

// The MH_Options the host would hand to create for `section`.
class OptionValues {
 public:
  OptionValues(const MH_ComponentDesc& desc, std::string section, const Overrides& overrides)
      : section_(std::move(section)) {
    for (size_t i = 0; i < desc.num_options; ++i) values_.push_back(from_default(desc.options[i]));
    for (const auto& [name, value] : overrides) set(name, value);
    raw_ = MH_Options{MH_STRUCT_SIZE(MH_Options, section), values_.data(), values_.size(),
                      section_.c_str()};
  }
  OptionValues(const OptionValues&) = delete;
  OptionValues& operator=(const OptionValues&) = delete;

  const MH_Options* get() const { return &raw_; }

 private:
  MH_NamedValue from_default(const MH_OptionSpec& spec) {
    MH_NamedValue v{spec.name, spec.type, 0, {}};
    std::string text = spec.default_value != nullptr ? spec.default_value : "";
    switch (spec.type) {
      case MH_VALUE_BOOL: v.value.b = text == "true" ? 1 : 0; break;
      case MH_VALUE_INT: v.value.i = std::stoll(text); break;
      case MH_VALUE_DOUBLE: v.value.d = std::stod(text); break;
      default: v.value.s = keep(text.substr(1, text.size() - 2)); break;  // strip the quotes
    }
    return v;
  }

  void set(const std::string& name, const OptionValue& value) {
    for (MH_NamedValue& v : values_) {
      if (name != v.name) continue;
      if (const bool* b = std::get_if<bool>(&value)) v.value.b = *b ? 1 : 0;
      if (const int64_t* i = std::get_if<int64_t>(&value)) v.value.i = *i;
      if (const double* d = std::get_if<double>(&value)) v.value.d = *d;
      if (const std::string* s = std::get_if<std::string>(&value)) v.value.s = keep(*s);
      return;
    }
    throw std::invalid_argument("test overrides undeclared option '" + name + "'");
  }

  const char* keep(std::string s) { return strings_.emplace_back(std::move(s)).c_str(); }

  std::string section_;
  std::deque<std::string> strings_;
  std::vector<MH_NamedValue> values_;
  MH_Options raw_{};
};

// What create answers for these options: "OK" or the error it returned.
inline std::string create_result(const MH_ComponentDesc& desc, const std::string& section,
                                 const Overrides& overrides = {}) {
  OptionValues options(desc, section, overrides);
  MH_CreateArgs args{MH_STRUCT_SIZE(MH_CreateArgs, rank), options.get(), 1, -1};
  MH_Instance* self = nullptr;
  std::string result = describe(desc.create(&args, &self));
  desc.destroy(self);
  return result;
}

// An instance created and destroyed through its descriptor; Api is the
// kind's function table (MH_TensorParallelApi, ...).
template <class Api>
class Instance {
 public:
  Instance(const MH_ComponentDesc& desc, const std::string& section,
           const Overrides& overrides = {})
      : desc_(desc) {
    OptionValues options(desc, section, overrides);
    MH_CreateArgs args{MH_STRUCT_SIZE(MH_CreateArgs, rank), options.get(), 1, -1};
    check(desc.create(&args, &self_), "create " + std::string(desc.name));
  }
  ~Instance() { desc_.destroy(self_); }
  Instance(const Instance&) = delete;
  Instance& operator=(const Instance&) = delete;

  const Api& api() const { return *static_cast<const Api*>(desc_.api); }
  MH_Instance* self() const { return self_; }

 private:
  MH_ComponentDesc desc_;
  MH_Instance* self_ = nullptr;
};

}  // namespace mh::testing
