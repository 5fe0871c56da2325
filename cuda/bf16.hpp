// The bfloat16 type of the CUDA backend, in its own header so that kernels (.cu) can name it
// without pulling in the host-side tensor views of cuda/precision.hpp.
#pragma once

#include <cuda_bf16.h>

namespace paci::cuda {

using bf16 = __nv_bfloat16;

}  // namespace paci::cuda
