# Fuzz targets for every decoder of bytes that arrive from the network
# (tests/fuzz/README.md). Each fuzz_<name>.c defines LLVMFuzzerTestOneInput.
# By default they link driver.c, which runs the corpus and then mutated
# inputs for TUTTI_FUZZ_SECONDS from a fixed seed (coverage-guided when the
# compiler has -fsanitize-coverage=trace-pc, as gcc and clang do). With
# -DTUTTI_FUZZ_LIBFUZZER=ON and clang they are libFuzzer binaries instead.
set(TUTTI_FUZZ_SECONDS 10 CACHE STRING "Seconds each fuzz test runs")
option(TUTTI_FUZZ_LIBFUZZER "Build the fuzz targets with clang's -fsanitize=fuzzer" OFF)
set(TUTTI_FUZZ_DIR ${CMAKE_CURRENT_LIST_DIR})
set(TUTTI_FUZZ_TARGETS uid root ring reply tcp proxy ras)

# Compiled only: the callback the flag calls lives in driver.c.
include(CheckCCompilerFlag)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
check_c_compiler_flag(-fsanitize-coverage=trace-pc TUTTI_HAVE_TRACE_PC)
unset(CMAKE_TRY_COMPILE_TARGET_TYPE)
if(TUTTI_FUZZ_LIBFUZZER AND NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
  message(FATAL_ERROR "TUTTI_FUZZ_LIBFUZZER needs clang (configure with CC=clang)")
endif()

foreach(t ${TUTTI_FUZZ_TARGETS})
  set(src ${TUTTI_FUZZ_DIR}/fuzz_${t}.c)
  if(TUTTI_FUZZ_LIBFUZZER)
    add_executable(fuzz_${t} ${src})
    target_compile_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    target_link_options(fuzz_${t} PRIVATE -fsanitize=fuzzer)
    # New inputs go to a directory of the build, never into the source tree.
    set(work ${CMAKE_CURRENT_BINARY_DIR}/fuzz-corpus/${t})
    file(MAKE_DIRECTORY ${work})
    add_test(NAME fuzz.${t} COMMAND fuzz_${t} -max_total_time=${TUTTI_FUZZ_SECONDS} -seed=1
             -rss_limit_mb=4096 -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/ ${work}
             ${TUTTI_FUZZ_DIR}/corpus/${t})
  else()
    add_executable(fuzz_${t} ${src} ${TUTTI_FUZZ_DIR}/driver.c)
    if(TUTTI_HAVE_TRACE_PC)
      set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS
                                  -fsanitize-coverage=trace-pc)
    endif()
    add_test(NAME fuzz.${t} COMMAND fuzz_${t} -t ${TUTTI_FUZZ_SECONDS} -s 1
             -o ${CMAKE_CURRENT_BINARY_DIR} ${TUTTI_FUZZ_DIR}/corpus/${t})
  endif()
  target_include_directories(fuzz_${t} PRIVATE ${CMAKE_SOURCE_DIR}/src ${TUTTI_FUZZ_DIR})
  target_link_libraries(fuzz_${t} PRIVATE tutti_static)
  set_tests_properties(fuzz.${t} PROPERTIES TIMEOUT 300 ENVIRONMENT
    "TUTTI_TIMEOUT=20;ASAN_OPTIONS=abort_on_error=1:detect_leaks=1;UBSAN_OPTIONS=halt_on_error=1:abort_on_error=1:print_stacktrace=1")
endforeach()

# A 4-rank job over TCP while strangers attack every port it listens on.
add_executable(test_hostile_job ${TUTTI_FUZZ_DIR}/test_hostile_job.c
                                ${CMAKE_SOURCE_DIR}/tests/common/harness.c)
target_include_directories(test_hostile_job PRIVATE ${CMAKE_SOURCE_DIR}/src
                                                    ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_hostile_job PRIVATE tutti_static)
# The test holds one rank at each bootstrap all-gather (see the test).
target_link_options(test_hostile_job PRIVATE -Wl,--wrap=tutti_bootstrap_allgather)
add_test(NAME hostile.job COMMAND test_hostile_job)
set_tests_properties(hostile.job PROPERTIES TIMEOUT 180 ENVIRONMENT "TUTTI_TIMEOUT=60")
