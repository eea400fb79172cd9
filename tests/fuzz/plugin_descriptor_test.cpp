// What the fixes of fuzzing findings promise (the crashing inputs are
// replayed from regressions/plugin_descriptor): a plugin whose option default
// is no valid value for the option is refused when it loads, naming the
// option, instead of crashing every run that assembles the component; and an
// option spec whose struct_size ends inside `doc` is read without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <megahost/options.hpp>

#include <cstddef>
#include <cstring>

#include "plugins/plugin_loader.hpp"
#include "plugins/registry.hpp"

namespace mh {
namespace {

using ::testing::HasSubstr;

// A plugin with one kernels component "k" whose one option is `option`.
class OneOptionPlugin {
 public:
  explicit OneOptionPlugin(const MH_OptionSpec& option)
      : option_(option),
        component_{MH_STRUCT_SIZE(MH_ComponentDesc, api),
                   MH_KIND_KERNELS,
                   "k",
                   "1.0",
                   "a kernels component",
                   &option_,
                   1,
                   [](const MH_CreateArgs*, MH_Instance**) -> MH_Error* { return nullptr; },
                   [](MH_Instance*) {},
                   &kTable},
        desc_{sizeof(MH_PluginDesc), MH_ABI_MAJOR,           MH_ABI_MINOR,          "p", "1.0", &component_, 1,
              sizeof(MH_ComponentDesc), sizeof(MH_OptionSpec)} {}
  OneOptionPlugin(const OneOptionPlugin&) = delete;
  OneOptionPlugin& operator=(const OneOptionPlugin&) = delete;

  const MH_PluginDesc* desc() const { return &desc_; }
  void declare_strides(size_t component_size, size_t option_size) {
    desc_.component_size = component_size;
    desc_.option_size = option_size;
  }

 private:
  // Every required entry set, as the loader requires; none is called.
  static MH_KernelsApi every_entry_set() {
    MH_KernelsApi table{sizeof(MH_KernelsApi)};
    void (*const stub)() = [] {};
    for (size_t at = offsetof(MH_KernelsApi, device_info); at + sizeof stub <= offsetof(MH_KernelsApi, rmsnorm);
         at += sizeof stub)
      std::memcpy(reinterpret_cast<char*>(&table) + at, &stub, sizeof stub);
    return table;
  }
  static inline const MH_KernelsApi kTable = every_entry_set();
  MH_OptionSpec option_;
  MH_ComponentDesc component_;
  MH_PluginDesc desc_;
};

std::string problem_with(const MH_OptionSpec& option) { return descriptor_problem(OneOptionPlugin(option).desc()); }

TEST(PluginDescriptor, SoundOptionDefaultsAreAccepted) {
  EXPECT_EQ(problem_with(opt_int("threads", "0", 0, 8, "threads")), "");
  EXPECT_EQ(problem_with(opt_double("eps", "1", 0, 1, "an integer is a number")), "");
  EXPECT_EQ(problem_with(opt_choice("dtype", "\"f32\"", "f32|bf16", "dtype")), "");
  EXPECT_EQ(problem_with(opt("size", MH_VALUE_INT, nullptr, "required: no default")), "");
}

TEST(PluginDescriptor, OptionDefaultThatIsNoTomlValueIsRefused) {
  EXPECT_THAT(problem_with(opt("eps", MH_VALUE_DOUBLE, "", "eps")),
              HasSubstr("component #0 ('k'): option #0 'eps': default '' is not a TOML value"));
}

TEST(PluginDescriptor, OptionDefaultOfAnotherTypeIsRefused) {
  EXPECT_THAT(problem_with(opt("name", MH_VALUE_STRING, "4", "name")), HasSubstr("default '4' is not a string"));
  EXPECT_THAT(problem_with(opt_int("n", "1.5", 0, 8, "n")), HasSubstr("default '1.5' is not an integer"));
}

TEST(PluginDescriptor, OptionDefaultOutsideItsRangeOrChoicesIsRefused) {
  EXPECT_THAT(problem_with(opt_int("n", "9", 0, 8, "n")), HasSubstr("default '9': must be <= 8, got 9"));
  EXPECT_THAT(problem_with(opt_choice("dtype", "\"f64\"", "f32|bf16", "dtype")),
              HasSubstr("default '\"f64\"': 'f64' is not one of f32|bf16"));
}

TEST(PluginDescriptor, OptionDefaultOfSeveralValuesIsRefused) {
  EXPECT_THAT(problem_with(opt_int("n", "1\nm = 2", 0, 8, "n")), HasSubstr("is more than one TOML value"));
}

TEST(PluginDescriptor, OptionStructSizeEndingInsideDocIsReadWithoutDoc) {
  MH_OptionSpec option = opt_int("n", "1", 0, 8, "the doc");
  option.struct_size = MH_STRUCT_SIZE(MH_OptionSpec, doc) - 3;
  OneOptionPlugin plugin(option);
  ASSERT_EQ(descriptor_problem(plugin.desc()), "");
  std::vector<LoadedPlugin> loaded(1);
  loaded[0].desc = plugin.desc();
  Diagnostics diag;
  Registry registry(loaded, diag);
  const Component* k = registry.find(MH_KIND_KERNELS, "k");
  ASSERT_NE(k, nullptr);
  EXPECT_STREQ(k->desc->options[0].name, "n");
  EXPECT_EQ(k->desc->options[0].doc, nullptr);
}

// The arrays' strides come from the descriptor, and one that would
// misalign or overlap the elements is refused rather than followed.
TEST(PluginDescriptor, DeclaredStridesAreFollowedWhenSound) {
  OneOptionPlugin plugin(opt_int("n", "1", 0, 8, "n"));
  plugin.declare_strides(sizeof(MH_ComponentDesc), sizeof(MH_OptionSpec));
  EXPECT_EQ(descriptor_problem(plugin.desc()), "");
}

TEST(PluginDescriptor, MisalignedOptionStrideIsRefused) {
  OneOptionPlugin plugin(opt_int("n", "1", 0, 8, "n"));
  plugin.declare_strides(sizeof(MH_ComponentDesc), sizeof(MH_OptionSpec) - 4);
  EXPECT_THAT(descriptor_problem(plugin.desc()), HasSubstr("component #0 ('k'): its option_size 60 is not a multiple of 8"));
}

TEST(PluginDescriptor, ComponentStrideSmallerThanItsStructSizeIsRefused) {
  OneOptionPlugin plugin(opt_int("n", "1", 0, 8, "n"));
  plugin.declare_strides(64, sizeof(MH_OptionSpec));
  EXPECT_THAT(descriptor_problem(plugin.desc()),
              HasSubstr("its component_size 64 is smaller than an element's struct_size 80: the elements would overlap"));
}

}  // namespace
}  // namespace mh
