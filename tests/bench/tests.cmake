# The bench scripts' shared harness (bench/lib.sh): failed, timed-out and
# silent runs make a bench script fail and name the run.
add_test(NAME bench.lib COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/lib_test.sh)
set_tests_properties(bench.lib PROPERTIES TIMEOUT 60)
# Every bench script that runs without a GPU, on fake programs (missing,
# failing, hanging past a 1 s limit, printing no rows): each must exit
# non-zero and name the run, and pass on a fake that prints proper rows.
add_test(NAME bench.fail COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/fail_test.sh)
set_tests_properties(bench.fail PROPERTIES TIMEOUT 240)
# The memory benchmarks' harness (bench/memjob.c: comm_mem.c and
# suspend_mem.c run their ranks through it) on the CPU.
add_executable(test_memjob ${CMAKE_CURRENT_LIST_DIR}/test_memjob.c ${CMAKE_SOURCE_DIR}/bench/memjob.c)
target_include_directories(test_memjob PRIVATE ${CMAKE_SOURCE_DIR}/bench)
target_link_libraries(test_memjob PRIVATE ${CMAKE_DL_LIBS})
add_test(NAME bench.memjob COMMAND test_memjob)
set_tests_properties(bench.memjob PROPERTIES TIMEOUT 60)
