// The comm_threads plugin: ranks as threads of one process.
#include "threads_comm.hpp"

MH_PLUGIN("comm_threads", "0.1.0", mh::comm::threads::threads_component())
