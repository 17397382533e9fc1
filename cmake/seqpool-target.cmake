# seqpool::seqpool for CMake consumers, from source (CMakeLists.txt) or installed
# (seqpoolConfig.cmake); seqpool itself builds with Meson. The includer sets
# SEQPOOL_HEADERS, the folder that holds seqpool/, and may set
# SEQPOOL_CCCL_HINTS, folders to search for CCCL's CMake package.
#
# What the target carries:
#   C++20, and CUDA C++20 for .cu sources;
#   OpenMP: -fopenmp for the host compiler (through -Xcompiler for nvcc), which
#     Thrust's OpenMP system and the host space's parallel loops need;
#   CCCL 3.x (Thrust, CUB, libcu++) for host-compiled sources: the package of the
#     CUDA toolkit nvcc belongs to, or the one in PyPI's nvidia-cuda-cccl wheel
#     (CCCL_DIR=<site-packages>/nvidia/cu13/lib/cmake/cccl). nvcc compiles
#     against the CCCL it was released with, so .cu sources get no other.
include_guard(GLOBAL)

if(NOT TARGET OpenMP::OpenMP_CXX)
  find_package(OpenMP REQUIRED COMPONENTS CXX)
endif()

if(NOT TARGET CCCL::libcudacxx)
  find_package(CUDAToolkit QUIET)
  set(_seqpool_cccl_hints ${SEQPOOL_CCCL_HINTS})
  if(CUDAToolkit_FOUND)
    list(APPEND _seqpool_cccl_hints "${CUDAToolkit_LIBRARY_DIR}/cmake/cccl")
  endif()
  find_package(CCCL 3 CONFIG QUIET COMPONENTS libcudacxx HINTS ${_seqpool_cccl_hints})
  if(NOT CCCL_FOUND)
    message(FATAL_ERROR "seqpool needs CCCL 3.x: install the CUDA toolkit, or `pip install nvidia-cuda-cccl` "
                        "and set CCCL_DIR to <site-packages>/nvidia/cu13/lib/cmake/cccl")
  endif()
endif()
# Thrust and CUB lie beside libcu++ in every CCCL layout (toolkit, wheel, source).
get_target_property(_seqpool_cccl_include CCCL::libcudacxx INTERFACE_INCLUDE_DIRECTORIES)

add_library(seqpool::seqpool INTERFACE IMPORTED GLOBAL)
set_target_properties(OpenMP::OpenMP_CXX PROPERTIES IMPORTED_GLOBAL TRUE)
target_include_directories(seqpool::seqpool INTERFACE "${SEQPOOL_HEADERS}")
target_include_directories(seqpool::seqpool SYSTEM INTERFACE
  "$<$<COMPILE_LANGUAGE:CXX>:${_seqpool_cccl_include}>")
target_compile_features(seqpool::seqpool INTERFACE cxx_std_20)
# CUDA sources: C++20, as a compile feature where CMake knows it for this nvcc
# (3.25 does not for nvcc 13), else as nvcc's flag.
get_property(_seqpool_languages GLOBAL PROPERTY ENABLED_LANGUAGES)
if(CUDA IN_LIST _seqpool_languages AND "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
  target_compile_features(seqpool::seqpool INTERFACE cuda_std_20)
else()
  target_compile_options(seqpool::seqpool INTERFACE "$<$<COMPILE_LANGUAGE:CUDA>:-std=c++20>")
endif()
target_compile_options(seqpool::seqpool INTERFACE
  "$<$<COMPILE_LANGUAGE:CUDA>:SHELL:-Xcompiler ${OpenMP_CXX_FLAGS}>")
target_link_libraries(seqpool::seqpool INTERFACE OpenMP::OpenMP_CXX)
