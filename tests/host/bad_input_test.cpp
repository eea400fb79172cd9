// What a user sees when the run's input is wrong: every problem, located
// (file:line:col or "command line") with a fix where one is plausible, then
// the count, exit status 2 and nothing run.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "config_file_test.hpp"

namespace mh::host::testing {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class BadInput : public ConfigFileTest {
 protected:
  // "<config>:line:col: ", the prefix of a located problem.
  std::string at(int line, int column) const {
    return config_ + ":" + std::to_string(line) + ":" + std::to_string(column) + ": ";
  }
  static void expect_refused(const Outcome& o, int problems) {
    EXPECT_EQ(o.status, 2);
    EXPECT_THAT(o.err, HasSubstr(std::to_string(problems) + " problem(s); nothing was run\n"));
    EXPECT_THAT(o.out, Not(HasSubstr("assembled")));
  }
};

TEST_F(BadInput, MalformedTomlIsReportedWithFileLineAndColumn) {
  Outcome o = run("[model]\nlayers = 4\nhidden = = 64\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(3, 10) + "malformed TOML"));
}

TEST_F(BadInput, UnknownSectionSuggestsTheClosestKnownOne) {
  Outcome o = run("[modle]\nlayers = 4\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(1, 1) + "unknown section 'modle'; did you mean 'model'?"));
}

TEST_F(BadInput, UnknownKeySuggestsTheClosestKnownOne) {
  Outcome o = run("[model]\nhiden = 64\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(2, 9) + "unknown key 'model.hiden'; did you mean 'hidden'?"));
}

TEST_F(BadInput, ValueOfTheWrongTypeNamesTheTypeExpected) {
  Outcome o = run("[model]\nlayers = \"four\"\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(2, 10) + "'model.layers' must be an integer"));
}

TEST_F(BadInput, ANumberWhereTextIsExpectedSaysToQuoteIt) {
  Outcome o = run("[tuner]\nplugin = \"grid\"\ntensor = 2\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(3, 10) + "'tuner.tensor' must be a string; quote it: tuner.tensor = \"2\""));
}

TEST_F(BadInput, ValueOutOfRangeNamesTheBoundAndTheValue) {
  Outcome o = run("[model]\ndropout = 2\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(2, 11) + "'model.dropout' must be <= 0.99, got 2"));
}

// The kernels refused beta1 = 1 at the first step (status 1): validation
// holds the bound they need (below 1 in float).
TEST_F(BadInput, AdamBetaOfOneIsRefusedByValidationNotAtTheFirstStep) {
  Outcome o = run("[train]\nadam_beta1 = 1.0\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(2, 14) + "'train.adam_beta1' must be <= 0.999999, got 1"));
}

// A model-shape problem ended the layout check: the batch problem was
// reported only once the first was fixed.
TEST_F(BadInput, AModelShapeProblemAndABatchProblemAreReportedTogether) {
  Outcome o = run("[model]\nhidden = 65\n[train]\nglobal_batch = 5\nmicro_batch = 2\n");
  expect_refused(o, 2);
  EXPECT_THAT(o.err, HasSubstr("model.hidden = 65 is not divisible by model.heads = 4"));
  EXPECT_THAT(o.err, HasSubstr("make train.global_batch a multiple of 2"));
}

// LoRA on a mixture of experts adapted attention alone, silently, whatever
// peft.targets named.
TEST_F(BadInput, AdaptersOnExpertsAreRefusedNotSkipped) {
  Outcome o = run("[model]\narch = \"llama\"\nexperts = 4\nrouter_topk = 2\n[peft]\nmethod = \"lora\"\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("the experts take no adapters yet; set peft.targets = \"qkv,proj\""));
}

TEST_F(BadInput, SharedExpertsOrACapacityWithoutRoutedExpertsAreRefused) {
  Outcome o = run("[model]\narch = \"llama\"\nshared_experts = 1\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("model.shared_experts and model.moe_capacity_factor belong to a mixture of experts"));
  o = run("[model]\narch = \"llama\"\nexperts = 4\nshared_expert_gate = true\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("set model.shared_experts > 0 or the gate false"));
}

TEST_F(BadInput, ValueOutsideTheChoicesListsThemAndSuggestsOne) {
  Outcome o = run("[data]\ntokenizer = \"bytes\"\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(2, 13) + "'data.tokenizer' 'bytes' is not one of byte|gpt2|huggingface|sentencepiece; did you mean 'byte'?"));
}

TEST_F(BadInput, UnknownKeyInACommandLineOverrideIsLocatedOnTheCommandLine) {
  Outcome o = run("[model]\nlayers = 2\n", {"model.hiden=64"});
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr("error: command line: unknown key 'model.hiden'; did you mean 'hidden'?"));
}

TEST_F(BadInput, MissingPluginListsTheAvailableOnesOfItsKind) {
  Outcome o = run("[recompute]\nplugin = \"selectiv\"\n");
  expect_refused(o, 1);
  EXPECT_THAT(o.err, HasSubstr(at(2, 10) + "no recompute plugin named 'selectiv'; available: full, none, selective; "
                                            "did you mean 'selective'?"));
}

TEST_F(BadInput, EveryProblemIsReportedInOneRun) {
  Outcome o = run("[modle]\n"
                  "layers = 4\n"
                  "[model]\n"
                  "layers = \"four\"\n"
                  "dropout = 2\n"
                  "[recompute]\n"
                  "plugin = \"selectiv\"\n",
                  {"train.stpes=2"});
  expect_refused(o, 5);
  EXPECT_THAT(o.err, HasSubstr("unknown section 'modle'"));
  EXPECT_THAT(o.err, HasSubstr("'model.layers' must be an integer"));
  EXPECT_THAT(o.err, HasSubstr("'model.dropout' must be <= 0.99"));
  EXPECT_THAT(o.err, HasSubstr("no recompute plugin named 'selectiv'"));
  EXPECT_THAT(o.err, HasSubstr("unknown key 'train.stpes'; did you mean 'steps'?"));
}

// The embedded default run with a tiny model, dry: assembled on the dry
// kernels and planned, nothing trained.
TEST(ValidInput, DryRunAssemblesThePipelineAndPlansOneStep) {
  std::vector<std::string> args{"--dry_run"};
  for (const auto& o : tiny_run()) args.push_back(o);
  Outcome o = run_megahost(args);
  EXPECT_EQ(o.status, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("assembled from <embedded default config>:\n"));
  EXPECT_THAT(o.out, HasSubstr("  [kernels] dry "));
  EXPECT_THAT(o.out, HasSubstr("  [recompute] "));
  EXPECT_THAT(o.err, Not(HasSubstr("error:")));
}

}  // namespace
}  // namespace mh::host::testing
