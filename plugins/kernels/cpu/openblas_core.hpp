// OpenBLAS chooses its kernels by the CPU's model number, and a release does
// not know the models that came after it: Debian 12's 0.3.21 takes a
// 5th-generation Xeon (family 6, model 207) for a Prescott and runs its SSE3
// kernels, 4.5x slower than its AVX-512 ones on the same CPU. This chooses by
// the CPU's features instead, as oneDNN does.
#pragma once

namespace mh::kernels::cpu {

// When OPENBLAS_CORETYPE is unset (a user's choice is kept) and OpenBLAS's
// kernels use narrower vectors than the CPU has, makes OpenBLAS choose again
// with the best core the CPU's features allow. Call before any thread uses
// BLAS or reads the environment: it sets OPENBLAS_CORETYPE.
void use_best_openblas_core();

}  // namespace mh::kernels::cpu
