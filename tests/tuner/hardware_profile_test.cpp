// Hardware profiles as the host reads them: the shipped ones load, every
// problem of a broken one is reported with file:line:col, and what
// --calibrate writes reads back unchanged.
#include "tuner/hardware_profile.hpp"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "data/temp_dir.hpp"

namespace mh {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using data::testing::TempDir;

std::optional<HardwareProfile> load(const std::string& name, Diagnostics& diag,
                                    std::vector<std::filesystem::path> dirs = {MEGAHOST_HARDWARE_DIR}) {
  return load_hardware_profile(name, dirs, diag);
}

TEST(HardwareProfiles, TheShippedDgxProfilesLoadWithThePublishedPeaksAndMemory) {
  Diagnostics diag;
  const auto a100 = load("dgx_a100_80gb", diag), h100 = load("dgx_h100", diag), h200 = load("dgx_h200", diag);
  ASSERT_FALSE(diag.has_errors()) << diag.report();
  EXPECT_DOUBLE_EQ(a100->peak_flops, 312e12);
  EXPECT_EQ(a100->memory_bytes, uint64_t(80) << 30);
  EXPECT_DOUBLE_EQ(h100->peak_flops, 989.4e12);
  EXPECT_GT(h200->memory_bytes, uint64_t(140) << 30);
  for (const auto* p : {&*a100, &*h100, &*h200}) {
    EXPECT_EQ(p->dtype, MH_BF16);
    EXPECT_EQ(p->devices_per_node, 8);
    EXPECT_FALSE(p->shared_device);
    EXPECT_EQ(p->view().num_vector, 16u) << p->name;
  }
}

TEST(HardwareProfiles, EveryProblemIsReportedWithItsFileLineAndColumn) {
  TempDir dir;
  const std::string file = dir.write("bad.toml", "name = \"bad\"\ndevice = \"x\"\nmemory_gib = 8\ncolour = 3\n\n"
                                                 "[[collective]]\nlevel = \"rack\"\nlatency_us = 1\nbusbw_gbs = 1\n");
  Diagnostics diag;
  EXPECT_FALSE(load(file, diag).has_value());
  EXPECT_THAT(diag.report(), AllOf(HasSubstr("missing required key 'hardware.peak_gflops'"),
                                   HasSubstr(file + ":4:10: unknown key 'hardware.colour'"),
                                   HasSubstr(file + ":7:9: 'collective.level' 'rack' is not one of intra|inter")));
  EXPECT_EQ(diag.error_count(), 3u);
}

TEST(HardwareProfiles, MoreRanksComputingThanSharingTheDeviceIsAnError) {
  TempDir dir;
  const std::string file = dir.write("busy.toml", "name = \"x\"\ndevice = \"x\"\nmemory_gib = 8\npeak_gflops = 1\n\n"
                                                  "[[gemm]]\nranks = 2\nbusy = 4\nm = 8\nn = 8\nk = 8\ngflops = 1\n");
  Diagnostics diag;
  EXPECT_FALSE(load(file, diag).has_value());
  EXPECT_THAT(diag.report(), HasSubstr(file + ":6:1: busy = 4 exceeds ranks = 2"));
}

TEST(HardwareProfiles, AnUnknownNameSaysWhereItLookedAndWhatExists) {
  Diagnostics diag;
  EXPECT_FALSE(load("dgx_z100", diag).has_value());
  EXPECT_THAT(diag.report(), AllOf(HasSubstr("no hardware profile 'dgx_z100' in " MEGAHOST_HARDWARE_DIR),
                                   HasSubstr("dgx_a100_80gb, dgx_h100, dgx_h200")));
}

TEST(HardwareProfiles, WhatCalibrationWritesReadsBackUnchanged) {
  HardwareProfile p;
  p.name = "local_cpu";
  p.device = "cpu: test";
  p.calibrated = "quick";
  p.dtype = MH_F32;
  p.devices_per_node = 2;
  p.shared_device = true;
  p.peak_flops = 5.5e10;
  p.memory_bytes = uint64_t(3) << 30;
  p.gemm = {{2, 0, 8, 128, 32, 64, 1.25e10}, {2, 1, 8, 128, 32, 64, 2e10}};
  p.vector = {{"softmax", 2, 1, 16384, 8, 3.5e9}};
  p.collectives = {{MH_LINK_INTRA_NODE, 4, "all_gather", 2.5e-5, 1.5e9}};
  TempDir dir;
  write_hardware_profile(p, dir.file("p.toml"), "# test\n");
  Diagnostics diag;
  const auto q = load(dir.file("p.toml"), diag);
  ASSERT_TRUE(q.has_value()) << diag.report();
  EXPECT_EQ(q->devices_per_node, 2);
  EXPECT_EQ(q->calibrated, "quick");
  EXPECT_TRUE(q->shared_device);
  EXPECT_DOUBLE_EQ(q->peak_flops, 5.5e10);
  EXPECT_EQ(q->memory_bytes, p.memory_bytes);
  ASSERT_EQ(q->gemm.size(), 2u);
  EXPECT_EQ(q->gemm[0].busy, 0);
  EXPECT_EQ(q->gemm[1].busy, 1);
  EXPECT_EQ(q->gemm[0].batch, 8);
  EXPECT_EQ(q->gemm[0].k, 64);
  EXPECT_DOUBLE_EQ(q->gemm[0].flops_per_s, 1.25e10);
  ASSERT_EQ(q->vector.size(), 1u);
  EXPECT_EQ(q->vector[0].busy, 1);
  EXPECT_EQ(q->vector[0].elements, 16384);
  EXPECT_DOUBLE_EQ(q->vector[0].bytes_per_s, 3.5e9);
  ASSERT_EQ(q->collectives.size(), 1u);
  EXPECT_EQ(q->collectives[0].op, "all_gather");
  EXPECT_NEAR(q->collectives[0].latency_s, 2.5e-5, 1e-12);
}

}  // namespace
}  // namespace mh
