# run_install_test.cmake — the install-tier test, run by ctest as `cmake -P` (see
# CMakeLists.txt next to this file for the variables it receives).
#
#   1. cmake --install <FASTRMA_BINARY_DIR> --prefix <WORK_DIR>/prefix
#   2. check the installed header and package files are there
#   3. configure tests/install/consumer with CMAKE_PREFIX_PATH=<prefix> only (package
#      registries off), and check find_package(fastrma) picked the installed config
#   4. build it
#   5. check the program exists and resolves libfastrma.so from the prefix
#   6. run it (MPI singleton) and check it reports success
#   7. with OSC_* given: run a drop-in program on the installed Open MPI osc component
#      (mpiexec -n 2 --mca osc fastrma, mca_component_path = the prefix's component
#      directory and Open MPI's own; run_dropin.sh checks fastrma served every rank)
#
# Every failure stops with FATAL_ERROR and the output of the failing step, which ctest
# prints with --output-on-failure.
cmake_minimum_required(VERSION 3.20)

foreach(var FASTRMA_BINARY_DIR CONSUMER_SOURCE_DIR WORK_DIR C_COMPILER)
  if(NOT DEFINED ${var} OR "${${var}}" STREQUAL "")
    message(FATAL_ERROR "run_install_test.cmake: -D${var}=... is required")
  endif()
endforeach()

set(prefix "${WORK_DIR}/prefix")
set(consumer_build "${WORK_DIR}/consumer-build")

# run(<step name> <command...>): execute, fail with the full output if it fails.
function(run step)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE rc
    OUTPUT_VARIABLE out
    ERROR_VARIABLE out
    TIMEOUT 240)
  if(NOT rc STREQUAL "0")
    string(REPLACE ";" " " cmd "${ARGN}")
    message(FATAL_ERROR "install test: ${step} failed (${rc})\n  command: ${cmd}\n${out}")
  endif()
  message(STATUS "install test: ${step}: ok")
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
file(MAKE_DIRECTORY "${WORK_DIR}")

# 1. Install.
set(config_args "")
if(DEFINED FASTRMA_CONFIG AND NOT FASTRMA_CONFIG STREQUAL "")
  set(config_args --config "${FASTRMA_CONFIG}")
endif()
run("cmake --install" "${CMAKE_COMMAND}" --install "${FASTRMA_BINARY_DIR}"
    --prefix "${prefix}" ${config_args})

# 2. What a downstream project needs must be in the prefix.
if(NOT EXISTS "${prefix}/include/fastrma/fastrma.h")
  message(FATAL_ERROR "install test: ${prefix}/include/fastrma/fastrma.h was not installed")
endif()
file(GLOB_RECURSE package_config "${prefix}/*/fastrmaConfig.cmake")
file(GLOB_RECURSE package_version "${prefix}/*/fastrmaConfigVersion.cmake")
file(GLOB_RECURSE package_targets "${prefix}/*/fastrmaTargets.cmake")
if(NOT package_config OR NOT package_version OR NOT package_targets)
  message(FATAL_ERROR "install test: fastrmaConfig.cmake, fastrmaConfigVersion.cmake or "
                      "fastrmaTargets.cmake missing under ${prefix}")
endif()
file(GLOB_RECURSE installed_shared "${prefix}/*/libfastrma.so")
if(NOT installed_shared)
  message(FATAL_ERROR "install test: libfastrma.so was not installed under ${prefix}")
endif()

# 3. Configure the consumer against the prefix alone.
set(gen_args "")
if(DEFINED GENERATOR AND NOT GENERATOR STREQUAL "")
  list(APPEND gen_args -G "${GENERATOR}")
  if(DEFINED MAKE_PROGRAM AND NOT MAKE_PROGRAM STREQUAL "")
    list(APPEND gen_args "-DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM}")
  endif()
endif()
set(build_type "${FASTRMA_CONFIG}")
if(build_type STREQUAL "" OR build_type MATCHES "\\$<")
  set(build_type Release)
endif()
set(consumer_args
  "-DCMAKE_PREFIX_PATH=${prefix}"
  "-DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF"
  "-DCMAKE_FIND_USE_SYSTEM_PACKAGE_REGISTRY=OFF"
  "-DCMAKE_BUILD_TYPE=${build_type}"
  "-DCMAKE_C_COMPILER=${C_COMPILER}"
  "-DFASTRMA_EXPECTED_VERSION=${FASTRMA_VERSION}")
if(DEFINED CXX_COMPILER AND NOT CXX_COMPILER STREQUAL "")
  list(APPEND consumer_args "-DCMAKE_CXX_COMPILER=${CXX_COMPILER}")
endif()
if(DEFINED SANITIZER_FLAGS AND NOT SANITIZER_FLAGS STREQUAL "")
  list(APPEND consumer_args
    "-DCMAKE_C_FLAGS=${SANITIZER_FLAGS}"
    "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZER_FLAGS}")
endif()
run("configure consumer" "${CMAKE_COMMAND}" --no-warn-unused-cli
    -S "${CONSUMER_SOURCE_DIR}" -B "${consumer_build}" ${gen_args} ${consumer_args})

# find_package must have used the installed package, not the parent build tree.
file(STRINGS "${consumer_build}/CMakeCache.txt" fastrma_dir_line REGEX "^fastrma_DIR:")
string(REGEX REPLACE "^fastrma_DIR:[A-Z]+=" "" fastrma_dir "${fastrma_dir_line}")
file(REAL_PATH "${prefix}" real_prefix)
if(EXISTS "${fastrma_dir}")
  file(REAL_PATH "${fastrma_dir}" fastrma_dir)
endif()
string(FIND "${fastrma_dir}/" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install test: find_package(fastrma) used '${fastrma_dir}', "
                      "not the installed package under ${real_prefix}")
endif()

# 4. Build it.
run("build consumer" "${CMAKE_COMMAND}" --build "${consumer_build}" --config "${build_type}")

# 5. The program exists and its libfastrma.so is the installed one.
set(exe "${consumer_build}/fastrma_consumer")
if(NOT EXISTS "${exe}")
  file(GLOB_RECURSE exe_candidates "${consumer_build}/*fastrma_consumer")
  list(FILTER exe_candidates EXCLUDE REGEX "CMakeFiles")
  list(GET exe_candidates 0 exe)
endif()
if(NOT exe OR NOT EXISTS "${exe}")
  message(FATAL_ERROR "install test: the consumer program was not built in ${consumer_build}")
endif()
file(GET_RUNTIME_DEPENDENCIES
  EXECUTABLES "${exe}"
  RESOLVED_DEPENDENCIES_VAR resolved
  UNRESOLVED_DEPENDENCIES_VAR unresolved
  PRE_INCLUDE_REGEXES "libfastrma"
  PRE_EXCLUDE_REGEXES ".*")
if(unresolved)
  message(FATAL_ERROR "install test: ${exe} cannot resolve: ${unresolved}")
endif()
set(found_fastrma "")
foreach(lib IN LISTS resolved)
  if(lib MATCHES "libfastrma")
    set(found_fastrma "${lib}")
  endif()
endforeach()
if(found_fastrma STREQUAL "")
  message(FATAL_ERROR "install test: ${exe} does not link libfastrma.so (resolved: ${resolved})")
endif()
file(REAL_PATH "${found_fastrma}" found_fastrma_real)
string(FIND "${found_fastrma_real}" "${real_prefix}/" at)
if(NOT at EQUAL 0)
  message(FATAL_ERROR "install test: ${exe} loads ${found_fastrma_real}, not the installed "
                      "library under ${real_prefix}")
endif()
message(STATUS "install test: ${exe} loads ${found_fastrma_real}")

# 6. Run it: a singleton MPI process needs no mpiexec.
run("run consumer" "${CMAKE_COMMAND}" -E env
    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
    OMPI_MCA_hwloc_base_binding_policy=none
    "${exe}")
if(NOT last_output MATCHES "fastrma consumer: OK")
  message(FATAL_ERROR "install test: the consumer exited 0 but did not report success:\n"
                      "${last_output}")
endif()
# 7. The installed osc component, found through mca_component_path alone.
if(DEFINED OSC_PROGRAM AND NOT OSC_PROGRAM STREQUAL "")
  set(component "${prefix}/${OSC_INSTALL_DIR}/mca_osc_fastrma.so")
  if(NOT EXISTS "${component}")
    message(FATAL_ERROR "install test: ${component} was not installed")
  endif()
  string(REPLACE "|" ";" osc_flags "${OSC_MPIEXEC_FLAGS}")
  run("run on the installed osc component" "${CMAKE_COMMAND}" -E env
      OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
      bash "${OSC_RUNNER}" osc "${prefix}/${OSC_INSTALL_DIR}:${OSC_OMPI_COMPONENT_DIR}"
      "${OSC_MPIEXEC}" -n 2 ${osc_flags} -- "${OSC_PROGRAM}")
  message(STATUS "install test: the installed osc component served ${OSC_PROGRAM}")
endif()
message(STATUS "install test: passed")
