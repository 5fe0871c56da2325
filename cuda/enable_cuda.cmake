# Included by the top-level CMakeLists.txt: decides whether the CUDA backend is built (PACI_CUDA is
# AUTO, ON or OFF) and, when it is, enables CUDA at the top level. Sets PACI_CUDA_ENABLED.
# AUTO builds it when nvcc, cuBLAS and cuBLASLt are found; ON stops configuring if they are not.
set(PACI_CUDA_ENABLED OFF)
string(TOUPPER "${PACI_CUDA}" _paci_cuda_mode)
if(NOT _paci_cuda_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "PACI_CUDA must be AUTO, ON or OFF, not '${PACI_CUDA}'")
endif()
if(_paci_cuda_mode STREQUAL "OFF")
  message(STATUS "paci: CUDA backend off (PACI_CUDA=OFF)")
  return()
endif()

include(CheckLanguage)
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  find_program(_paci_nvcc nvcc)
  if(NOT _paci_nvcc)  # installed but not on PATH: CUDA's default prefix
    set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc CACHE FILEPATH "CUDA compiler")
  endif()
endif()
check_language(CUDA)
if(NOT CMAKE_CUDA_COMPILER)
  if(_paci_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "PACI_CUDA=ON but no CUDA compiler was found: put nvcc on PATH or set "
                        "CMAKE_CUDA_COMPILER / CUDACXX")
  endif()
  message(STATUS "paci: CUDA backend off (no nvcc found; PACI_CUDA=AUTO)")
  return()
endif()

# sm_90 covers the H100 and H200 (SASS plus PTX, which newer GPUs JIT-compile). One architecture
# keeps CI's 2-core compile short; pass -DCMAKE_CUDA_ARCHITECTURES=native (or "80;90") for others.
set(CMAKE_CUDA_ARCHITECTURES 90 CACHE STRING "CUDA architectures of the CUDA backend")
set(CMAKE_CUDA_RUNTIME_LIBRARY Shared)  # one cudart in the process: the CUDA::cudart we link
enable_language(CUDA)
# CMake 3.25 knows nvcc's language levels only up to C++17; nvcc 12 and later take -std=c++20.
if(NOT DEFINED CMAKE_CUDA20_STANDARD_COMPILE_OPTION
   AND CMAKE_CUDA_COMPILER_VERSION VERSION_GREATER_EQUAL 12.0)
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
endif()
set(CMAKE_CUDA_STANDARD 20)
set(CMAKE_CUDA_STANDARD_REQUIRED ON)
set(CMAKE_CUDA_EXTENSIONS OFF)
find_package(CUDAToolkit)
if(NOT TARGET CUDA::cudart OR NOT TARGET CUDA::cublas OR NOT TARGET CUDA::cublasLt)
  if(_paci_cuda_mode STREQUAL "ON")
    message(FATAL_ERROR "PACI_CUDA=ON but the CUDA toolkit's cudart, cuBLAS or cuBLASLt is missing")
  endif()
  message(STATUS "paci: CUDA backend off (cudart, cuBLAS or cuBLASLt not found; PACI_CUDA=AUTO)")
  return()
endif()
set(PACI_CUDA_ENABLED ON)
message(STATUS "paci: CUDA backend on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
               "architectures ${CMAKE_CUDA_ARCHITECTURES})")
