// split() into Megatron-like tensor groups (color = rank / 2) and data
// groups (color = rank % 2), and collectives inside them.
#include "threads_fixture.hpp"

#include <memory>
#include <vector>

namespace mh::comm::testing {
namespace {

class ThreadsSplit : public ThreadsTest {};
MH_THREADS_WORLD_SIZES(ThreadsSplit);

// A split group released through the table when it goes out of scope.
struct GroupPtr {
  const MH_CommApi* api;
  MH_Group* group = nullptr;
  ~GroupPtr() {
    if (group != nullptr) api->group_destroy(group);
  }
};

std::unique_ptr<GroupPtr> split(const Comm& comm, MH_Group* parent, int32_t color, int32_t key) {
  auto out = std::make_unique<GroupPtr>(GroupPtr{&comm.api()});
  Status s(comm.api().split(parent, color, key, &out->group));
  EXPECT_TRUE(s.ok()) << s.message;
  return out;
}

// The global ranks of a group, gathered over the group.
std::vector<int32_t> members(const Comm& comm, MH_Group* group, int32_t global_rank) {
  std::vector<int32_t> send{global_rank}, recv(comm.api().group_size(group));
  auto a = args<int32_t>(send, recv);
  EXPECT_TRUE(Status(comm.api().all_gather(group, &a)).ok());
  return recv;
}

std::vector<int32_t> ranks_where(int32_t size, bool (*keep)(int32_t rank, int32_t me), int32_t me) {
  std::vector<int32_t> out;
  for (int32_t r = 0; r < size; ++r)
    if (keep(r, me)) out.push_back(r);
  return out;
}

TEST_P(ThreadsSplit, TensorGroupsPairNeighbouringRanks) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    auto tp = split(comm, world, rank / 2, rank);
    const auto expected = ranks_where(size(), [](int32_t r, int32_t me) { return r / 2 == me / 2; }, rank);
    EXPECT_EQ(comm.api().group_size(tp->group), static_cast<int32_t>(expected.size()));
    EXPECT_EQ(comm.api().group_rank(tp->group), rank % 2);
    EXPECT_EQ(members(comm, tp->group, rank), expected);
  });
}

TEST_P(ThreadsSplit, DataGroupsTakeEveryOtherRank) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    auto dp = split(comm, world, rank % 2, rank);
    const auto expected = ranks_where(size(), [](int32_t r, int32_t me) { return r % 2 == me % 2; }, rank);
    EXPECT_EQ(comm.api().group_size(dp->group), static_cast<int32_t>(expected.size()));
    EXPECT_EQ(comm.api().group_rank(dp->group), rank / 2);
    EXPECT_EQ(members(comm, dp->group, rank), expected);

    std::vector<float> send{static_cast<float>(rank)}, sum(1);
    auto a = args<float>(send, sum);
    ASSERT_TRUE(Status(comm.api().all_reduce(dp->group, &a)).ok());
    float expected_sum = 0;
    for (int32_t r : expected) expected_sum += static_cast<float>(r);
    EXPECT_EQ(sum[0], expected_sum);
  });
}

// Megatron interleaves tensor- and data-parallel collectives; each group
// keeps its own order.
TEST_P(ThreadsSplit, TensorAndDataGroupsWorkSideBySide) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    auto tp = split(comm, world, rank / 2, rank);
    auto dp = split(comm, world, rank % 2, rank);
    for (int32_t step = 0; step < 50; ++step) {
      std::vector<float> send{1.0f}, tp_sum(1), dp_sum(1);
      auto a = args<float>(send, tp_sum);
      auto b = args<float>(send, dp_sum);
      ASSERT_TRUE(Status(comm.api().all_reduce(tp->group, &a)).ok());
      ASSERT_TRUE(Status(comm.api().all_reduce(dp->group, &b)).ok());
      ASSERT_EQ(tp_sum[0], static_cast<float>(comm.api().group_size(tp->group)));
      ASSERT_EQ(dp_sum[0], static_cast<float>(comm.api().group_size(dp->group)));
    }
  });
}

TEST_P(ThreadsSplit, KeysOrderTheNewGroupThenParentRanksBreakTies) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    auto reversed = split(comm, world, 0, -rank);
    EXPECT_EQ(comm.api().group_rank(reversed->group), size() - 1 - rank);
    auto tied = split(comm, reversed->group, 0, 7);
    EXPECT_EQ(comm.api().group_rank(tied->group), size() - 1 - rank);
  });
}

TEST_P(ThreadsSplit, NestedSplitsWork) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    auto half = split(comm, world, rank < size() / 2 ? 0 : 1, rank);
    auto pairs = split(comm, half->group, comm.api().group_rank(half->group) / 2, 0);
    const auto got = members(comm, pairs->group, rank);
    EXPECT_LE(got.size(), 2u);
    EXPECT_EQ(got[comm.api().group_rank(pairs->group)], rank);
  });
}

TEST_P(ThreadsSplit, NegativeColorIsRefusedOnEveryRank) {
  Comm comm = make();
  run_ranks(comm, [&](int32_t rank, MH_Group* world) {
    MH_Group* group = nullptr;
    Status s(comm.api().split(world, rank == 0 ? -1 : 0, 0, &group));
    EXPECT_EQ(s.code, MH_INVALID_ARGUMENT);
    EXPECT_NE(s.message.find("global rank 0 passed color -1"), std::string::npos) << s.message;
    EXPECT_TRUE(Status(comm.api().barrier(world)).ok());
  });
}

}  // namespace
}  // namespace mh::comm::testing
