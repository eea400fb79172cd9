// --list_plugins: one line per component with kind, name, version, the ABI
// its plugin was built for and the file it came from.
#include <gtest/gtest.h>

#include <regex>

#include "megahost_process.hpp"

namespace mh::host::testing {
namespace {

TEST(ListPlugins, ListsAComponentOfEveryKindBuiltWithVersionAbiAndFile) {
  Outcome o = run_megahost({"--list_plugins"});
  ASSERT_EQ(o.status, 0) << o.err;
  const std::pair<const char*, const char*> built[] = {
      {"kernels", "cpu"},       {"comm", "threads"}, {"parallel.tensor", "megatron"}, {"parallel.pipeline", "megatron"},
      {"parallel.data", "megatron"}, {"parallel.context", "megatron"}, {"recompute", "selective"},
  };
  for (const auto& [kind, name] : built) {
    std::vector<std::string> row = listed(o.out, kind, name);
    ASSERT_EQ(row.size(), 5u) << kind << " " << name << " missing from\n" << o.out;
    EXPECT_TRUE(std::regex_match(row[2], std::regex(R"(\d+\.\d+\.\d+)"))) << "version " << row[2];
    EXPECT_EQ(row[3], abi_version());
    EXPECT_TRUE(std::regex_match(row[4], std::regex(R"(/.*/plugins/mh_\w+\.so)"))) << "file " << row[4];
  }
}

}  // namespace
}  // namespace mh::host::testing
