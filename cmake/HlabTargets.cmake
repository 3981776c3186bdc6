# Helpers that give every hlab target the same warnings and layout.

set(HLAB_WARNINGS
  -Wall -Wextra -Wshadow -Wnon-virtual-dtor -Woverloaded-virtual
  -Wcast-align -Wunused -Wpointer-arith -Wformat=2 -Wimplicit-fallthrough)

# hlab_target_defaults(<target>): include root, warnings, -Werror in CI.
function(hlab_target_defaults target)
  target_include_directories(${target} PUBLIC ${PROJECT_SOURCE_DIR})
  target_compile_options(${target} PRIVATE ${HLAB_WARNINGS})
  if(HLAB_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
    # GCC 12 in C++20 mode reports impossible memcpy sizes inside libstdc++'s
    # own inlined `"literal" + std::string` (GCC bug 105329, fixed in 13):
    # kept as warnings there, not errors.
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND
       CMAKE_CXX_COMPILER_VERSION VERSION_LESS 13 AND
       CMAKE_CXX_STANDARD GREATER_EQUAL 20)
      target_compile_options(${target} PRIVATE -Wno-error=restrict
        -Wno-error=stringop-overflow)
    endif()
  endif()
endfunction()

# hlab_library(<name> SOURCES ... [DEPS ...] [PRIVATE_DEPS ...])
# Creates hlab_<name> with alias hlab::<name>.
function(hlab_library name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;PRIVATE_DEPS" ${ARGN})
  add_library(hlab_${name} STATIC ${ARG_SOURCES})
  add_library(hlab::${name} ALIAS hlab_${name})
  hlab_target_defaults(hlab_${name})
  target_link_libraries(hlab_${name} PUBLIC ${ARG_DEPS} PRIVATE ${ARG_PRIVATE_DEPS})
endfunction()

# hlab_torch_pch(<target>): precompiled LibTorch headers for a target that
# includes them (a torch/torch.h include costs ~10-15 s per file on 2 cores).
# Every such target reuses the one PCH built by hlab_torch_pch_base, so it is
# compiled once per build.
function(hlab_torch_pch target)
  if(NOT TARGET hlab_torch_pch_base)
    add_library(hlab_torch_pch_base OBJECT ${PROJECT_SOURCE_DIR}/cmake/torch_pch.cc)
    hlab_target_defaults(hlab_torch_pch_base)
    target_link_libraries(hlab_torch_pch_base PRIVATE ${TORCH_LIBRARIES}
      hlab_openmp)
    target_precompile_headers(hlab_torch_pch_base PRIVATE <torch/torch.h>)
  endif()
  target_precompile_headers(${target} REUSE_FROM hlab_torch_pch_base)
  # LibTorch's at::parallel_for is header-inline OpenMP: without -fopenmp it
  # runs serially in our code. Same flag as the PCH, or the PCH is rejected.
  # One OpenMP runtime, LibTorch's: cmake/HlabTorch.cmake.
  target_link_libraries(${target} PRIVATE hlab_openmp)
endfunction()

# hlab_test(<name> SOURCES ... DEPS ... [LABELS ...]): a GoogleTest binary
# registered with ctest.
function(hlab_test name)
  cmake_parse_arguments(ARG "" "" "SOURCES;DEPS;LABELS" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  hlab_target_defaults(${name})
  target_link_libraries(${name} PRIVATE ${ARG_DEPS} GTest::gtest GTest::gtest_main)
  set_target_properties(${name} PROPERTIES RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests)
  add_test(NAME ${name} COMMAND ${name})
  if(ARG_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${ARG_LABELS}")
  endif()
endfunction()
