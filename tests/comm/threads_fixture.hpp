// Threads-communicator tests run for world sizes 1, 2, 3, 4 and 8; each test
// creates its own instance (and so its own timeout).
#pragma once

#include "comm_harness.hpp"
#include "threads_comm.hpp"

#include <gtest/gtest.h>

#include <string>

namespace mh::comm::testing {

class ThreadsTest : public ::testing::TestWithParam<int32_t> {
 protected:
  int32_t size() const { return GetParam(); }
  Comm make(double timeout_s = 5.0) const {
    return Comm(threads::threads_component(), {{"world_size", size()}, {"timeout_s", timeout_s}});
  }
};

inline std::string world_size_name(const ::testing::TestParamInfo<int32_t>& info) {
  return "world" + std::to_string(info.param);
}

}  // namespace mh::comm::testing

#define MH_THREADS_WORLD_SIZES(Suite) \
  INSTANTIATE_TEST_SUITE_P(Sizes, Suite, ::testing::Values(1, 2, 3, 4, 8), ::mh::comm::testing::world_size_name)
