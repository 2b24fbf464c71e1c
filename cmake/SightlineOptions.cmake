# Decides which optional parts are built. Each part whose dependency is missing is switched off
# with one summary line; nothing optional ever fails the configure step.

set(_sightline_summary "")
macro(_sightline_note line)
  list(APPEND _sightline_summary "${line}")
endmacro()

# GUI: Qt6 Widgets.
set(SIGHTLINE_HAVE_GUI OFF)
if(SIGHTLINE_BUILD_GUI)
  find_package(Qt6 6.2 QUIET COMPONENTS Widgets)
  if(Qt6Widgets_FOUND)
    set(SIGHTLINE_HAVE_GUI ON)
    _sightline_note("gui     : on  (Qt ${Qt6Widgets_VERSION})")
  else()
    _sightline_note("gui     : off (Qt6 Widgets not found; install qt6-base-dev)")
  endif()
else()
  _sightline_note("gui     : off (SIGHTLINE_BUILD_GUI=OFF)")
endif()

# libtorch: the unpacked wheel in third_party/libtorch (scripts/setup.sh) or any Torch on
# CMAKE_PREFIX_PATH (on the GPU machine: the torch package's share/cmake).
set(SIGHTLINE_HAVE_TORCH OFF)
if(SIGHTLINE_WITH_TORCH)
  if(EXISTS "${CMAKE_CURRENT_SOURCE_DIR}/third_party/libtorch/share/cmake/Torch")
    list(APPEND CMAKE_PREFIX_PATH "${CMAKE_CURRENT_SOURCE_DIR}/third_party/libtorch/share/cmake")
  endif()
  find_path(SIGHTLINE_TORCH_CONFIG_DIR TorchConfig.cmake PATH_SUFFIXES Torch NO_CACHE)
  if(SIGHTLINE_TORCH_CONFIG_DIR)
    set(SIGHTLINE_HAVE_TORCH ON)
    _sightline_note("torch   : on  (${SIGHTLINE_TORCH_CONFIG_DIR})")
  else()
    _sightline_note("torch   : off (libtorch not found; run scripts/setup.sh)")
  endif()
else()
  _sightline_note("torch   : off (SIGHTLINE_WITH_TORCH=OFF)")
endif()

# CUDA: the toolkit with CUPTI.
set(SIGHTLINE_HAVE_CUDA OFF)
if(SIGHTLINE_WITH_CUDA)
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND AND TARGET CUDA::cupti)
    set(SIGHTLINE_HAVE_CUDA ON)
    _sightline_note("cuda    : on  (CUDA ${CUDAToolkit_VERSION}, CUPTI)")
  elseif(CUDAToolkit_FOUND)
    _sightline_note("cuda    : off (CUDA ${CUDAToolkit_VERSION} found but not CUPTI)")
  else()
    _sightline_note("cuda    : off (CUDA toolkit not found; expected under /usr/local/cuda)")
  endif()
else()
  _sightline_note("cuda    : off (SIGHTLINE_WITH_CUDA=OFF)")
endif()

function(sightline_print_summary)
  message(STATUS "Sightline ${PROJECT_VERSION} parts:")
  foreach(line IN LISTS _sightline_summary)
    message(STATUS "  ${line}")
  endforeach()
endfunction()

# A program or library built against libtorch's CPU part (the test programs, the op-cost
# benchmarks): sightline_torch_target(NAME EXECUTABLE|STATIC|SHARED SOURCES...). Call it where
# TARGET sightline_torch exists (libtorch was found).
function(sightline_torch_target name kind)
  if(NOT TORCH_CUDA_ARCH_LIST)
    set(TORCH_CUDA_ARCH_LIST "9.0")
  endif()
  find_package(Torch QUIET)
  if(kind STREQUAL "EXECUTABLE")
    add_executable(${name} ${ARGN})
  else()
    add_library(${name} ${kind} ${ARGN})
  endif()
  target_include_directories(${name} SYSTEM PRIVATE ${TORCH_INCLUDE_DIRS})
  target_link_libraries(${name} PRIVATE torch_cpu c10)
endfunction()
