// Plugins that are wrong, old, odd or clashing (tests/fixtures), each from
// its own folder handed to megahost with --plugin_path: the host refuses
// the broken ones naming file and reason, runs the sound ones, and survives
// whatever their create does.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <megahost/abi.h>

#include <filesystem>
#include <map>

#include "data/temp_dir.hpp"
#include "megahost_process.hpp"

namespace mh::host::testing {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

Outcome list_plugins(const std::string& plugin_path) {
  return run_megahost({"--plugin_path", plugin_path, "--list_plugins"});
}

// A dry run of the tiny model from `plugin_path`, with `recompute` as the
// body of the run.toml's [recompute] section.
Outcome dry_run(const std::string& plugin_path, const std::string& recompute) {
  mh::data::testing::TempDir dir;
  std::vector<std::string> args{"--plugin_path", plugin_path, "--dry_run", "--config",
                                dir.write("run.toml", "[recompute]\n" + recompute)};
  for (const auto& o : tiny_run()) args.push_back(o);
  return run_megahost(args);
}

TEST(FixturePlugins, PluginOfAnotherAbiMajorIsRefusedNamingBothVersions) {
  Outcome o = list_plugins(fixture("other_major"));
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.err, HasSubstr(fixture("other_major") + "/mh_other_major.so: refused: it was built for plugin ABI "
                                                        "major 3, this host speaks " + abi_version()));
}

// Neither 2.0's entry point nor 1.x's (which the 1.x adapter would take).
TEST(FixturePlugins, SharedObjectWithoutEntryPointIsRefusedByName) {
  Outcome o = list_plugins(fixture("no_entry"));
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.err, HasSubstr(fixture("no_entry") + "/mh_no_entry.so: refused: it has no symbol " MH_ENTRY_SYMBOL));
}

// A plugin's own helper library (here a copy of a plugin under a name
// without mh_) may sit beside it: it is not loaded, and nothing is refused.
TEST(FixturePlugins, SharedObjectNotNamedAsAPluginIsLeftAloneInAPluginFolder) {
  mh::data::testing::TempDir dir;
  std::filesystem::copy_file(fixture("no_entry") + "/mh_no_entry.so", dir.file("libhelper.so"));
  std::filesystem::copy_file(fixture("c_only") + "/mh_c_only.so", dir.file("mh_c_only.so"));
  Outcome o = list_plugins(dir.file(""));
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(listed(o.out, "recompute", "inputs_only"), Not(IsEmpty()));
  EXPECT_THAT(o.err, Not(HasSubstr("libhelper")));
}

TEST(FixturePlugins, PluginPathThatIsNoFolderIsBadInput) {
  Outcome o = list_plugins("/nonexistent/plugins");
  EXPECT_EQ(o.status, 2);
  EXPECT_THAT(o.err, HasSubstr("error: --plugin_path: '/nonexistent/plugins' is not a folder"));
}

TEST(FixturePlugins, CreateReturningAnErrorFailsTheRunWithItsMessage) {
  Outcome o = dry_run(fixture("failing_create"), "plugin = \"refuses\"\n");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, AllOf(HasSubstr("recompute 'refuses'"), HasSubstr("failed to start"),
                           HasSubstr("refuses: the policy's budget service is unreachable")));
}

TEST(FixturePlugins, CreateThrowingFailsTheRunWithTheExceptionTextInsteadOfTerminating) {
  Outcome o = dry_run(fixture("failing_create"), "plugin = \"throws\"\n");
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("failed to start: uncaught exception: throws: constructor bug"));
  EXPECT_THAT(o.err, Not(HasSubstr("terminate")));
}

TEST(FixturePlugins, DuplicateComponentComesFromTheFirstFolderOnThePathAndBothFilesAreNamed) {
  const std::string first = fixture("twin_first") + "/mh_twin_first.so";
  const std::string second = fixture("twin_second") + "/mh_twin_second.so";
  Outcome o = list_plugins(fixture("twin_first") + ":" + fixture("twin_second"));
  EXPECT_EQ(o.status, 0);
  EXPECT_THAT(listed(o.out, "recompute", "twin"), ElementsAre("recompute", "twin", "1.0.0", abi_version(), first));
  EXPECT_THAT(o.err, HasSubstr("warning: " + second + ": recompute component 'twin' is also provided by " + first +
                               ", which comes first on the plugin path and is used"));

  Outcome reversed = list_plugins(fixture("twin_second") + ":" + fixture("twin_first"));
  EXPECT_THAT(listed(reversed.out, "recompute", "twin"),
              ElementsAre("recompute", "twin", "2.0.0", abi_version(), second));
  EXPECT_THAT(reversed.err,
              HasSubstr("warning: " + first + ": recompute component 'twin' is also provided by " + second));
}

TEST(FixturePlugins, PluginOfAnOlderMinorWithShorterStructsLoadsAndBothItsOptionsReachIt) {
  Outcome listing = list_plugins(fixture("older_minor"));
  EXPECT_EQ(listing.status, 0) << listing.err;
  EXPECT_THAT(listed(listing.out, "recompute", "legacy"),
              ElementsAre("recompute", "legacy", "0.9.0", "1.0", fixture("older_minor") + "/mh_older_minor.so"));
  EXPECT_THAT(listing.out, HasSubstr("keep"));
  EXPECT_THAT(listing.out, HasSubstr("quiet"));
  EXPECT_THAT(listing.out, Not(HasSubstr("SENTINEL")));

  Outcome run = dry_run(fixture("older_minor"), "plugin = \"legacy\"\nkeep = \"inputs\"\nquiet = true\n");
  EXPECT_EQ(run.status, 0) << run.err;
  EXPECT_THAT(run.out, HasSubstr("[recompute] legacy 0.9.0 from mh_older_minor.so: keep=\"inputs\", quiet=true"));
}

// Two thread ranks in one tensor group, the policy deciding by rank.
TEST(FixturePlugins, RecomputePolicyDecidingByRankIsRefusedWhenPlannedNotDeadlockedInBackward) {
  mh::data::testing::TempDir dir;
  std::vector<std::string> args{"--plugin_path", fixture("rank_dependent"), "--config",
                                dir.write("run.toml", "[recompute]\nplugin = \"rank_dependent\"\n"),
                                "comm.world_size=2", "parallel.tensor.size=2", "parallel.pipeline.size=1",
                                "train.steps=1"};
  for (const auto& o : tiny_run()) args.push_back(o);
  Outcome o = run_megahost(args);
  EXPECT_EQ(o.status, 1);
  EXPECT_THAT(o.err, HasSubstr("recompute 'rank_dependent' decides differently on tensor-group rank 1 than on rank 0"));
  EXPECT_THAT(o.err, HasSubstr("must be a function of the query alone"));
}

TEST(FixturePlugins, PluginWrittenInPlainCRunsAsARecomputePolicy) {
  Outcome o = dry_run(fixture("c_only"), "plugin = \"inputs_only\"\n");
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("[recompute] inputs_only 1.0.0 from mh_c_only.so"));
}

// The garbage folder holds one plugin per defect; each is refused alone.
// garbage_v1 holds the same plugins built with the 1.8 SDK, which the 1.x
// adapter refuses for the same reasons.
class GarbageDescriptor : public ::testing::TestWithParam<std::string> {
 protected:
  const Outcome& outcome() {
    static std::map<std::string, Outcome> listed;
    auto it = listed.find(GetParam());
    if (it == listed.end()) it = listed.emplace(GetParam(), list_plugins(fixture(GetParam()))).first;
    return it->second;
  }
  std::string refused(const std::string& defect) {
    return fixture(GetParam()) + "/mh_" + GetParam() + "_" + defect + ".so: refused: component #0 ";
  }
};

TEST_P(GarbageDescriptor, NullCreateIsRefused) {
  EXPECT_EQ(outcome().status, 2);
  EXPECT_THAT(outcome().err,
              HasSubstr(refused("no_create") + "('no_create') lacks create, destroy or its function table"));
}

TEST_P(GarbageDescriptor, KindOutOfRangeIsRefused) {
  EXPECT_THAT(outcome().err, HasSubstr(refused("bad_kind") + "has unknown kind 42"));
}

TEST_P(GarbageDescriptor, OptionCountWithNullOptionListIsRefused) {
  EXPECT_THAT(outcome().err, HasSubstr(refused("null_options") + "('null_options') has a NULL option list"));
}

TEST_P(GarbageDescriptor, FunctionTableShorterThanItsKindNeedsIsRefused) {
  EXPECT_THAT(outcome().err, HasSubstr(refused("short_table") + "('short_table') has a function table of 8 bytes; "
                                                                "its kind needs 16"));
}

TEST_P(GarbageDescriptor, NoneOfThemIsListed) { EXPECT_THAT(outcome().out, Not(HasSubstr("garbage"))); }

INSTANTIATE_TEST_SUITE_P(EachMajor, GarbageDescriptor, ::testing::Values("garbage", "garbage_v1"));

}  // namespace
}  // namespace mh::host::testing
