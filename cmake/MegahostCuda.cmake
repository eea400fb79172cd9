# What the cuda kernels plugin, the nccl comm plugin and their tests share
# (docs/gpu.md). Include it at the top of their CMakeLists.txt; it sets
# MEGAHOST_CUDA_PLUGINS to ON when they are to be built, and defines
# megahost_cuda_rpath() for their modules.
#
# The top-level CMakeLists.txt sets MEGAHOST_CUDA when check_language(CUDA)
# found nvcc, and says so when it did not.
set(MEGAHOST_CUDA_PLUGINS OFF)
if(NOT MEGAHOST_CUDA)
  return()
endif()
if(MEGAHOST_SANITIZE OR MEGAHOST_FUZZ)
  # Those builds add -fsanitize to every compile, which nvcc does not take.
  get_property(reported GLOBAL PROPERTY MEGAHOST_CUDA_SKIP_REPORTED)
  if(NOT reported)
    message(STATUS "megahost: the cuda kernels and nccl plugins are not built with MEGAHOST_SANITIZE or MEGAHOST_FUZZ")
    set_property(GLOBAL PROPERTY MEGAHOST_CUDA_SKIP_REPORTED ON)
  endif()
  return()
endif()

find_package(CUDAToolkit REQUIRED)
set(MEGAHOST_CUDA_PLUGINS ON)

# Device code for A100 and H100/H200 unless the build names its own
# (-DCMAKE_CUDA_ARCHITECTURES=90, or native on a machine with a GPU). Read by
# enable_language(CUDA), so include this file before it.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES 80 90)
endif()
# CMake 3.25.1 has no CUDA20 flags for nvcc (fixed in 3.25.2); the .cu files
# are C++17 and keep to kernels and their launchers, the C++20 SDK helpers
# stay in the .cpp files.
set(CMAKE_CUDA_STANDARD 17)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
# One shared libcudart for the plugin and cuBLAS (the default, Static, would
# also put libcudart_static.a on the link line).
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)
# CMAKE_CXX_VISIBILITY_PRESET does not reach .cu files.
set(CMAKE_CUDA_VISIBILITY_PRESET hidden)

# CMake treats the toolkit's library folder as an implicit link folder and
# adds no RPATH for it, so a plugin loaded where ld.so.conf does not list it
# would not find libcudart, libcublas or libnccl.
function(megahost_cuda_rpath target)
  set_property(TARGET ${target} APPEND PROPERTY BUILD_RPATH "${CUDAToolkit_LIBRARY_DIR}")
  set_property(TARGET ${target} APPEND PROPERTY INSTALL_RPATH "${CUDAToolkit_LIBRARY_DIR}")
endfunction()
