# What hlab needs to know about the LibTorch it found (find_package(Torch)):
# Debian's CPU build (1.13, /usr) or a CUDA build, typically a pip wheel's
# (python3 -c 'import torch; print(torch.utils.cmake_prefix_path)').
# docs/training.md, "Building for GPUs", says what each check is for.
#
#   CMAKE_CXX_STANDARD   raised to 20 when LibTorch's headers require it
#   HLAB_TORCH_CUDA      ON when LibTorch has CUDA
#   hlab_openmp          an interface target: -fopenmp with ONE OpenMP
#                        runtime, the one LibTorch itself uses
#   HLAB_NCCL_INCLUDE    the directory of nccl.h (CUDA builds), or empty
#   HLAB_TORCH_GLOO      ON when the Gloo headers are there (CPU ranks)

# The C++ standard. LibTorch >= 2.14 (pytorch#178150) stops every C++17
# translation unit with "#error C++20 or later compatible compiler is
# required to use ATen". Its ATen.h says which it needs, whatever the
# version number, so read it there.
foreach(dir ${TORCH_INCLUDE_DIRS})
  if(EXISTS "${dir}/ATen/ATen.h")
    file(STRINGS "${dir}/ATen/ATen.h" _hlab_aten_needs_cxx20
      REGEX "__cplusplus < 202002L")
    if(_hlab_aten_needs_cxx20 AND CMAKE_CXX_STANDARD LESS 20)
      set(CMAKE_CXX_STANDARD 20)
      message(STATUS "hlab: building as C++20, which LibTorch "
        "${Torch_VERSION} needs (${dir}/ATen/ATen.h)")
    endif()
    # GCC 10 takes -std=c++20 but reports the draft's __cplusplus (201709L).
    if(CMAKE_CXX_STANDARD EQUAL 20 AND CMAKE_CXX_COMPILER_ID STREQUAL "GNU"
       AND CMAKE_CXX_COMPILER_VERSION VERSION_LESS 11)
      message(FATAL_ERROR "hlab: C++20 (this LibTorch's headers need it) "
        "needs GCC >= 11; this is GCC ${CMAKE_CXX_COMPILER_VERSION}. Set "
        "CXX to a newer g++ (or clang++ >= 14) and configure a fresh tree.")
    endif()
    break()
  endif()
endforeach()

if(TARGET torch_cuda OR TORCH_CUDA_LIBRARIES)
  set(HLAB_TORCH_CUDA ON)
else()
  set(HLAB_TORCH_CUDA OFF)
endif()

# The C++ ABI. hlab's other libraries (abseil, gRPC, protobuf, from Debian)
# use the new (C++11) std::string ABI; a LibTorch built with the old one
# (pip wheels before 2.6, "-D_GLIBCXX_USE_CXX11_ABI=0") links against them
# with undefined references to std::string functions, far from the cause.
if("${TORCH_CXX_FLAGS}" MATCHES "_GLIBCXX_USE_CXX11_ABI=0")
  message(FATAL_ERROR
    "hlab: this LibTorch (${Torch_DIR}, ${Torch_VERSION}) is built with the "
    "old C++ ABI (-D_GLIBCXX_USE_CXX11_ABI=0), and hlab's other libraries "
    "with the new one. Use a LibTorch with the C++11 ABI: pip wheels of torch "
    ">= 2.6 (or the 'cxx11 ABI' LibTorch zip of older releases).")
endif()

# One OpenMP runtime. LibTorch's at::parallel_for is header-inline OpenMP,
# so hlab compiles with -fopenmp. A pip wheel bundles its own libgomp
# (torch/lib/libgomp-<hash>.so.1); linking the system's libgomp as well puts
# two OpenMP runtimes, each with its own thread pool, in one process. With a
# bundled one, hlab links that one; otherwise (Debian) the system's, which is
# what LibTorch links.
find_package(OpenMP REQUIRED)
file(GLOB HLAB_TORCH_BUNDLED_GOMP "${TORCH_INSTALL_PREFIX}/lib/libgomp*.so*")
add_library(hlab_openmp INTERFACE)
target_compile_options(hlab_openmp INTERFACE ${OpenMP_CXX_FLAGS})
if(HLAB_TORCH_BUNDLED_GOMP)
  list(GET HLAB_TORCH_BUNDLED_GOMP 0 HLAB_GOMP)
  target_link_libraries(hlab_openmp INTERFACE ${HLAB_GOMP})
  message(STATUS "hlab: OpenMP runtime: LibTorch's own ${HLAB_GOMP}")
else()
  target_link_libraries(hlab_openmp INTERFACE OpenMP::OpenMP_CXX)
endif()

# nccl.h. A pip wheel's ProcessGroupNCCL.hpp includes <nccl.h>, which the
# nvidia-nccl wheel keeps in site-packages/nvidia/.../include, outside
# LibTorch's include path.
set(HLAB_NCCL_INCLUDE "")
if(HLAB_TORCH_CUDA)
  find_path(HLAB_NCCL_INCLUDE_DIR nccl.h
    HINTS ${TORCH_INCLUDE_DIRS} ENV NCCL_HOME ENV CUDA_HOME
    PATH_SUFFIXES include)
  if(NOT HLAB_NCCL_INCLUDE_DIR)
    file(GLOB HLAB_NCCL_WHEEL_HEADERS
      "${TORCH_INSTALL_PREFIX}/../nvidia/*/include/nccl.h"
      "${TORCH_INSTALL_PREFIX}/../nvidia/*/*/include/nccl.h")
    if(HLAB_NCCL_WHEEL_HEADERS)
      list(GET HLAB_NCCL_WHEEL_HEADERS 0 _hlab_nccl_h)
      get_filename_component(_hlab_nccl_dir "${_hlab_nccl_h}" DIRECTORY)
      get_filename_component(HLAB_NCCL_INCLUDE_DIR "${_hlab_nccl_dir}" ABSOLUTE)
    endif()
  endif()
  if(NOT HLAB_NCCL_INCLUDE_DIR)
    message(FATAL_ERROR
      "hlab: this LibTorch has CUDA, but nccl.h was not found (its "
      "ProcessGroupNCCL.hpp includes it). Install NCCL's headers (the "
      "nvidia-nccl wheel, or libnccl-dev), or set NCCL_HOME to the directory "
      "above include/nccl.h.")
  endif()
  set(HLAB_NCCL_INCLUDE "${HLAB_NCCL_INCLUDE_DIR}")
  message(STATUS "hlab: CUDA LibTorch; nccl.h in ${HLAB_NCCL_INCLUDE}")
endif()

# Gloo, for CPU data-parallel ranks. LibTorch 2.x declares ProcessGroupGloo
# only with USE_C10D_GLOO defined, and a wheel may lack the Gloo headers.
# Only LibTorch's own count: its Gloo is built in, and another copy's headers
# (a system libgloo-dev) need not match the layout it was built with.
set(HLAB_TORCH_GLOO OFF)
foreach(dir ${TORCH_INCLUDE_DIRS})
  if(EXISTS "${dir}/gloo/config.h")
    set(HLAB_TORCH_GLOO ON)
  endif()
endforeach()
if(NOT HLAB_TORCH_GLOO)
  message(STATUS "hlab: no Gloo headers: CPU data-parallel ranks "
    "(cpu_ranks > 1) are refused by this build")
endif()
