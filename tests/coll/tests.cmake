# Collectives end to end, ranks as processes over shared memory.
add_executable(test_coll_procs ${CMAKE_CURRENT_LIST_DIR}/test_coll_procs.c ${CMAKE_CURRENT_LIST_DIR}/checker.c
  ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_coll_procs PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_coll_procs PRIVATE tutti_static)
foreach(algo default Ring Direct Tree Pull Board)
  add_test(NAME coll.procs.${algo} COMMAND test_coll_procs 1,2,3,4,8 ${algo})
  set_tests_properties(coll.procs.${algo} PROPERTIES TIMEOUT 600 ENVIRONMENT "TUTTI_TIMEOUT=60")
endforeach()
# The board's all-gather in rounds of 4 KB slots (the default slot holds every count tested).
add_test(NAME coll.procs.Board.rounds COMMAND test_coll_procs 2,3,4,8 Board)
set_tests_properties(coll.procs.Board.rounds PROPERTIES TIMEOUT 600
  ENVIRONMENT "TUTTI_TIMEOUT=60;TUTTI_TUNE=board.slot=4k")
# Streaming stores into every out-of-place receive buffer (unaligned blocks,
# SUMPOSTDIV averages of integers), not only into those larger than a cache.
add_test(NAME coll.procs.Ring.stream COMMAND test_coll_procs 2,3,4 Ring)
set_tests_properties(coll.procs.Ring.stream PROPERTIES TIMEOUT 600
  ENVIRONMENT "TUTTI_TIMEOUT=60;TUTTI_TUNE=stream=1")

# ncclCommShrink: a healthy shrink, and survivors shrinking after a rank died.
add_executable(test_shrink ${CMAKE_CURRENT_LIST_DIR}/test_shrink.c
                           ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_shrink PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_shrink PRIVATE tutti_static)
add_test(NAME coll.shrink COMMAND test_shrink)
set_tests_properties(coll.shrink PROPERTIES TIMEOUT 120 ENVIRONMENT "TUTTI_TIMEOUT=20")

# Host identity from NCCL_HOSTID / TUTTI_HOSTID: ranks of one machine as several hosts.
add_executable(test_hostid ${CMAKE_CURRENT_LIST_DIR}/test_hostid.c
                           ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_hostid PRIVATE ${CMAKE_SOURCE_DIR}/src
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_hostid PRIVATE tutti_static)
add_test(NAME coll.hostid COMMAND test_hostid)
set_tests_properties(coll.hostid PROPERTIES TIMEOUT 120 ENVIRONMENT "TUTTI_TIMEOUT=20")

# Mismatched calls: every rank fails at once, naming both calls; later calls fail the same way.
add_executable(test_misuse ${CMAKE_CURRENT_LIST_DIR}/test_misuse.c
                           ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_misuse PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_misuse PRIVATE tutti_static)
foreach(m procs threads hosts)
  add_test(NAME coll.misuse.${m} COMMAND test_misuse ${m})
  set_tests_properties(coll.misuse.${m} PROPERTIES TIMEOUT 300 ENVIRONMENT "TUTTI_TIMEOUT=20")
endforeach()

# Call agreement fuzzed: random programs, one call changed on one rank.
add_executable(test_agree_fuzz ${CMAKE_CURRENT_LIST_DIR}/test_agree_fuzz.c
  ${CMAKE_CURRENT_LIST_DIR}/checker.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_agree_fuzz PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_agree_fuzz PRIVATE tutti_static)
add_test(NAME coll.agree_fuzz.threads COMMAND test_agree_fuzz threads 300)
add_test(NAME coll.agree_fuzz.procs COMMAND test_agree_fuzz procs 60 1000)
set_tests_properties(coll.agree_fuzz.threads coll.agree_fuzz.procs PROPERTIES TIMEOUT 300
  ENVIRONMENT "TUTTI_TIMEOUT=20")

# A rank that fails while peers may still read or write its buffer (single
# copy) takes its offers back first: a late peer fails instead of touching
# memory the user has freed.
add_executable(test_withdraw ${CMAKE_CURRENT_LIST_DIR}/test_withdraw.c
                             ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_withdraw PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_withdraw PRIVATE tutti_static)
foreach(m procs threads)
  add_test(NAME coll.withdraw.${m} COMMAND test_withdraw ${m})
  set_tests_properties(coll.withdraw.${m} PROPERTIES TIMEOUT 120
    ENVIRONMENT "TUTTI_TIMEOUT=1;TUTTI_TUNE=all:1-inf:@pull")
endforeach()
