# The bench scripts' shared harness (bench/lib.sh): failed, timed-out and
# silent runs make a bench script fail and name the run.
add_test(NAME bench.lib COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/lib_test.sh)
set_tests_properties(bench.lib PROPERTIES TIMEOUT 60)
