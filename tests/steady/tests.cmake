# Steady-state tests: many init/destroy cycles leave nothing behind, and a
# random mix of collectives keeps giving exact results (tests/steady/README.md).
foreach(name leaks soak)
  add_executable(test_${name} ${CMAKE_CURRENT_LIST_DIR}/test_${name}.c ${CMAKE_SOURCE_DIR}/tests/coll/checker.c
    ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
  target_include_directories(test_${name} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests/coll
    ${CMAKE_SOURCE_DIR}/tests/common)
  target_link_libraries(test_${name} PRIVATE tutti_static)
endforeach()
add_test(NAME steady.leaks COMMAND test_leaks 2000 500)
set_tests_properties(steady.leaks PROPERTIES TIMEOUT 300 ENVIRONMENT "TUTTI_TIMEOUT=30")
add_test(NAME steady.soak COMMAND test_soak --ranks 4 --seconds 20 --seed 1)
set_tests_properties(steady.soak PROPERTIES TIMEOUT 300 ENVIRONMENT "TUTTI_TIMEOUT=30")

# TUTTI_DUMP_ON_SIGNAL: a waiting rank logs what it waits for on SIGUSR1.
add_executable(test_dump ${CMAKE_CURRENT_LIST_DIR}/test_dump.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_dump PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_dump PRIVATE tutti_static)
add_test(NAME steady.dump COMMAND test_dump)
set_tests_properties(steady.dump PROPERTIES TIMEOUT 60 ENVIRONMENT "TUTTI_TIMEOUT=30")

# Fault trials: a rank killed at a random moment of a random collective.
add_executable(test_kill ${CMAKE_CURRENT_LIST_DIR}/test_kill.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_kill PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_kill PRIVATE tutti_static)
add_test(NAME steady.kill COMMAND test_kill 6 4)
set_tests_properties(steady.kill PROPERTIES TIMEOUT 300 ENVIRONMENT "TUTTI_TIMEOUT=30")

# A stalled (stopped, or busy elsewhere) peer is reported as alive, with what it is doing.
add_executable(test_stall ${CMAKE_CURRENT_LIST_DIR}/test_stall.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_stall PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_stall PRIVATE tutti_static)
add_test(NAME steady.stall COMMAND test_stall)
set_tests_properties(steady.stall PROPERTIES TIMEOUT 120 ENVIRONMENT "TUTTI_TIMEOUT=3")
# The same with a window per rank and a put each way in every cycle: the
# one-sided service communicator and its thread leave nothing behind either.
add_test(NAME steady.leaks.windows COMMAND test_leaks 400 150 windows)
set_tests_properties(steady.leaks.windows PROPERTIES TIMEOUT 300 ENVIRONMENT "TUTTI_TIMEOUT=30")
