// The libFuzzer entry of one target, chosen at compile time (MH_FUZZ_TARGET).
#include "targets.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  mh::fuzz::MH_FUZZ_TARGET(mh::fuzz::Input(data, size));
  return 0;
}
