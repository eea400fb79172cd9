// Sizes and names of the ABI's element types (MH_DType), one table for the
// host and every plugin. Usable from CUDA device code.
#pragma once

#include <megahost/abi.h>

#include <stddef.h>
#include <stdint.h>

#if defined(__CUDACC__)
#define MH_DTYPE_HOST_DEVICE __host__ __device__
#else
#define MH_DTYPE_HOST_DEVICE
#endif

namespace mh {

// Bytes of one element; 0 for a value that is not an MH_DType.
MH_DTYPE_HOST_DEVICE constexpr size_t dtype_size(int32_t dtype) {
  switch (dtype) {
    case MH_F32:
    case MH_I32: return 4;
    case MH_BF16:
    case MH_F16: return 2;
    case MH_U8: return 1;
    case MH_I64: return 8;
    default: return 0;
  }
}

// "f32", "bf16", ...; "unknown" for a value that is not an MH_DType.
constexpr const char* dtype_name(int32_t dtype) {
  switch (dtype) {
    case MH_F32: return "f32";
    case MH_BF16: return "bf16";
    case MH_F16: return "f16";
    case MH_I32: return "i32";
    case MH_U8: return "u8";
    case MH_I64: return "i64";
    default: return "unknown";
  }
}

}  // namespace mh

#undef MH_DTYPE_HOST_DEVICE
