// Thin helpers over the MPI C API: error translation, datatypes and counts
// for a validated Call, and completion of a request against a deadline.
#pragma once

#include "collective.hpp"
#include "timeout.hpp"

#include <mpi.h>

#include <functional>
#include <vector>

namespace mh::comm::mpi {

// Throws mh::Error unless `rc` is MPI_SUCCESS: INVALID_ARGUMENT for a
// truncated message, UNAVAILABLE otherwise, naming `function` and MPI's text.
void check(int rc, const char* function);

// The datatype a call moves: the real type for a reduction (the dtypes
// reducible() admits), an unsigned integer of the element size otherwise.
MPI_Datatype datatype(const Call& call);

MPI_Op reduce_op(const Call& call);

// call.count as MPI's int; UNIMPLEMENTED when it does not fit.
int count(const Call& call);

// An all_to_all's per-peer counts and their packed displacements as MPI's
// ints (MPI_Alltoallv), UNIMPLEMENTED when one does not fit.
struct Blocks {
  std::vector<int> counts, displacements;
};
Blocks blocks(const std::vector<int64_t>& counts);

// Tests `request` until it completes (true, status filled) or `deadline`
// passes (false, request still active). Sleeps between tests after a short
// spin so that oversubscribed ranks leave the cores to their peers, and
// calls `while_waiting` (when given) before each sleep.
bool complete_by(MPI_Request& request, Clock::time_point deadline, MPI_Status& status,
                 const std::function<void()>& while_waiting = {});

}  // namespace mh::comm::mpi
