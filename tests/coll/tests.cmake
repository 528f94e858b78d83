# Collectives end to end, ranks as processes over shared memory.
add_executable(test_coll_procs ${CMAKE_CURRENT_LIST_DIR}/test_coll_procs.c ${CMAKE_CURRENT_LIST_DIR}/checker.c
  ${CMAKE_SOURCE_DIR}/tests/common/cuts.c
  ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_coll_procs PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_coll_procs PRIVATE tutti_static)
# Under ThreadSanitizer (which looks for races between the threads of one
# process: a rank's caller, proxy, service and RAS threads, as many at 2
# ranks as at 8) 2 and 4 ranks: 8 processes under it took 500 s of 2
# cores, 1-4 ranks 162 s.
# The rank counts in between run the chunks' cut points only
# (tests/common/cuts.h), so that every count from 2 to 8 meets the jitter:
# all three where the planner picks and where single copies and the board
# race with in-place outputs, some where rounds are cut.
if(TUTTI_SANITIZE MATCHES "thread")
  set(procs_ranks 2,4)
else()
  set(procs_ranks 1,2,3,4,8)
endif()
foreach(c "default|5,6,7" "Ring|5,7" "Direct|6" "Tree|6" "Pull|5,6,7" "Board|5,7")
  string(REPLACE "|" ";" f "${c}")
  list(GET f 0 algo)
  list(GET f 1 cut_ranks)
  if(TUTTI_SANITIZE MATCHES "thread")
    set(cut_ranks -)
  endif()
  add_test(NAME coll.procs.${algo} COMMAND test_coll_procs ${procs_ranks} ${algo} ${cut_ranks})
  set_tests_properties(coll.procs.${algo} PROPERTIES TIMEOUT 600 ENVIRONMENT "TUTTI_TIMEOUT=60")
endforeach()
# The hierarchical allreduce (forced; the others fall back) over hosts of
# two ranks (NCCL_HOSTID, TCP between them), at its cut points only: the
# ring of hosts splits the vector by hosts, the chains go in rounds.
add_test(NAME coll.procs.Hier COMMAND test_coll_procs - Hier 3,4,6)
set_tests_properties(coll.procs.Hier PROPERTIES TIMEOUT 600
  ENVIRONMENT "TUTTI_TIMEOUT=60;TEST_RANKS_PER_HOST=2")
# The checks of the checks: faults injected into results must be caught.
add_executable(test_checker_self ${CMAKE_CURRENT_LIST_DIR}/test_checker_self.c
  ${CMAKE_CURRENT_LIST_DIR}/checker.c ${CMAKE_SOURCE_DIR}/tests/common/harness.c)
target_include_directories(test_checker_self PRIVATE ${CMAKE_SOURCE_DIR}/src
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_checker_self PRIVATE tutti_static m)
add_test(NAME unit.checker_self COMMAND test_checker_self)
set_tests_properties(unit.checker_self PROPERTIES TIMEOUT 120)
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

# Deterministic reductions (TUTTI_DETERMINISTIC=1): every placement and
# forced algorithm against the fold in rank order, bit for bit, on inputs
# that make the order visible; and the default mode's ring unchanged.
add_executable(test_ordered ${CMAKE_CURRENT_LIST_DIR}/test_ordered.c
  ${CMAKE_SOURCE_DIR}/tests/common/cuts.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_ordered PRIVATE ${CMAKE_SOURCE_DIR}/src
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_ordered PRIVATE tutti_static m)
# name | mode | ranks | expected order | environment (& between variables)
set(TUTTI_ORDERED_CASES
  "threads|threads|1,2,4|ordered|"
  "threads.Ring.chunk|threads|3|ordered|NCCL_ALGO=Ring&NCCL_BUFFSIZE=65536"
  "threads.Pull|threads|3|ordered|TUTTI_TUNE=all:1-inf:@pull"
  "procs|procs|2,4|ordered|"
  "procs.Ring|procs|2,3,4|ordered|NCCL_ALGO=Ring"
  "procs.Direct|procs|3|ordered|NCCL_ALGO=Direct"
  "procs.Pull|procs|3,4|ordered|TUTTI_TUNE=all:1-inf:@pull"
  "procs.Board|procs|3|ordered|NCCL_ALGO=Board,Direct"
  "hosts|hosts|2,3|ordered|"
  "hosts.plugin|hosts|3|ordered|NCCL_NET_PLUGIN=$<TARGET_FILE:nccl_net_tutti>"
  "hosts.Tree|hosts|4|ordered|NCCL_ALGO=Tree"
  "pairs.Hier|pairs|4|ordered|NCCL_ALGO=Hier"
  "default_ring.threads|threads|3,4|ring|NCCL_ALGO=Ring"
  "default_ring.procs|procs|3|ring|NCCL_ALGO=Ring&NCCL_BUFFSIZE=65536")
foreach(c ${TUTTI_ORDERED_CASES})
  string(REPLACE "|" ";" f "${c}")
  list(GET f 0 name)
  list(GET f 1 mode)
  list(GET f 2 ranks)
  list(GET f 3 expect)
  list(GET f 4 extra)
  string(REPLACE "&" ";" extra "${extra}")
  set(env "TUTTI_TIMEOUT=60" ${extra})
  add_test(NAME coll.ordered.${name} COMMAND test_ordered ${mode} ${ranks} ${expect})
  set_tests_properties(coll.ordered.${name} PROPERTIES TIMEOUT 600 ENVIRONMENT "${env}")
endforeach()

# ncclCommSuspend / ncclCommResume / ncclCommMemStats on host communicators:
# cycles with exact allreduces, every error, groups, non-blocking
# communicators, destroy and abort while suspended; a rank that never
# suspends (TUTTI_TIMEOUT=2), or whose peer's suspend an abort ends;
# NCCL_DISABLE_MEM_MANAGER.
add_executable(test_suspend ${CMAKE_CURRENT_LIST_DIR}/test_suspend.c
                            ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_suspend PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_suspend PRIVATE tutti_static)
foreach(m threads procs)
  add_test(NAME coll.suspend.${m} COMMAND test_suspend ${m})
  set_tests_properties(coll.suspend.${m} PROPERTIES TIMEOUT 120 ENVIRONMENT "TUTTI_TIMEOUT=20")
endforeach()
add_test(NAME coll.suspend.missing COMMAND test_suspend missing)
set_tests_properties(coll.suspend.missing PROPERTIES TIMEOUT 60 ENVIRONMENT "TUTTI_TIMEOUT=2")
add_test(NAME coll.suspend.abort COMMAND test_suspend abort)
set_tests_properties(coll.suspend.abort PROPERTIES TIMEOUT 60 ENVIRONMENT "TUTTI_TIMEOUT=20")
add_test(NAME coll.suspend.disabled COMMAND test_suspend disabled)
set_tests_properties(coll.suspend.disabled PROPERTIES TIMEOUT 60
  ENVIRONMENT "TUTTI_TIMEOUT=20;NCCL_DISABLE_MEM_MANAGER=1")

# ncclCommGetUniqueId and ncclCommGrow, ranks as threads and as processes:
# 1 -> 2 -> 3 -> 5, every check, misuse failing on every rank, a group of
# non-blocking grows, a grow from a revoked communicator, a rank dying then
# shrink and grow back; every collective checked bit for bit at each step.
add_executable(test_grow ${CMAKE_CURRENT_LIST_DIR}/test_grow.c ${CMAKE_CURRENT_LIST_DIR}/team.c
  ${CMAKE_CURRENT_LIST_DIR}/every_coll.c ${CMAKE_CURRENT_LIST_DIR}/checker.c)
target_include_directories(test_grow PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR})
target_link_libraries(test_grow PRIVATE tutti_static)
foreach(mode threads procs)
  foreach(case chain local misuse group revoke shrink)
    add_test(NAME coll.grow.${mode}.${case} COMMAND test_grow ${mode} ${case})
    set_tests_properties(coll.grow.${mode}.${case} PROPERTIES TIMEOUT 120
                         ENVIRONMENT "TUTTI_TIMEOUT=20")
  endforeach()
endforeach()

# One-sided operations on host buffers (windows, ncclPutSignal, ncclSignal,
# ncclWaitSignal), checked byte for byte: ranks as threads, as processes over
# shared memory, and over TCP (tests/net adds the network transport).
add_executable(test_rma ${CMAKE_CURRENT_LIST_DIR}/test_rma.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_rma PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_rma PRIVATE tutti_static)
add_test(NAME coll.rma.threads COMMAND test_rma threads 1,2,3,4)
add_test(NAME coll.rma.procs COMMAND test_rma procs 2,3,4)
# Under ThreadSanitizer over TCP (a proxy thread per rank) 2 and 3 ranks.
if(TUTTI_SANITIZE MATCHES "thread")
  add_test(NAME coll.rma.tcp COMMAND test_rma procs 2,3)
else()
  add_test(NAME coll.rma.tcp COMMAND test_rma procs 2,3,4)
endif()
set_tests_properties(coll.rma.threads coll.rma.procs PROPERTIES TIMEOUT 300
  ENVIRONMENT "TUTTI_TIMEOUT=30")
set_tests_properties(coll.rma.tcp PROPERTIES TIMEOUT 300
  ENVIRONMENT "TUTTI_TIMEOUT=30;NCCL_SHM_DISABLE=1")

# One-sided operations when a peer stays silent (TUTTI_TIMEOUT), is killed,
# or the communicator is aborted from another thread: every wait and put
# ends with an error naming the peer, within the bound.
add_executable(test_rma_faults ${CMAKE_CURRENT_LIST_DIR}/test_rma_faults.c
                               ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
target_include_directories(test_rma_faults PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_CURRENT_LIST_DIR}
  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_rma_faults PRIVATE tutti_static)
# name | arguments | environment (& between variables)
set(TUTTI_RMA_FAULTS
  "timeout|timeout procs|TUTTI_TIMEOUT=2"
  "timeout.tcp|timeout procs|TUTTI_TIMEOUT=2&NCCL_SHM_DISABLE=1"
  "kill|kill procs|TUTTI_TIMEOUT=60"
  "kill.tcp|kill procs|TUTTI_TIMEOUT=60&NCCL_SHM_DISABLE=1"
  "abort.threads|abort threads|TUTTI_TIMEOUT=60"
  "abort.procs|abort procs|TUTTI_TIMEOUT=60"
  "abort_put|abort_put procs|TUTTI_TIMEOUT=60"
  "dropped|dropped threads|TUTTI_TIMEOUT=60")
foreach(c ${TUTTI_RMA_FAULTS})
  string(REPLACE "|" ";" f "${c}")
  list(GET f 0 name)
  list(GET f 1 args)
  list(GET f 2 env)
  separate_arguments(args UNIX_COMMAND "${args}")
  string(REPLACE "&" ";" env "${env}")
  add_test(NAME coll.rma_faults.${name} COMMAND test_rma_faults ${args})
  set_tests_properties(coll.rma_faults.${name} PROPERTIES TIMEOUT 120 ENVIRONMENT "${env}")
endforeach()
