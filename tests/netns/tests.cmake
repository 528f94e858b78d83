# The tcp transport: the collective matrix with shared memory switched off
# (every pair over TCP, ranks as processes of one host), then hosts as network
# namespaces (tests/netns/hosts.sh; skipped where namespaces cannot be made).
add_executable(test_netns_job ${CMAKE_CURRENT_LIST_DIR}/test_netns_job.c
                              ${CMAKE_SOURCE_DIR}/tests/coll/checker.c
                              ${CMAKE_SOURCE_DIR}/tests/common/cuts.c)
target_include_directories(test_netns_job PRIVATE ${CMAKE_SOURCE_DIR}/src
                                                  ${CMAKE_SOURCE_DIR}/tests/coll
                                                  ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_netns_job PRIVATE tutti_static)
add_executable(test_netns_grow ${CMAKE_CURRENT_LIST_DIR}/test_netns_grow.c
                               ${CMAKE_SOURCE_DIR}/tests/coll/every_coll.c
                               ${CMAKE_SOURCE_DIR}/tests/coll/checker.c)
target_include_directories(test_netns_grow PRIVATE ${CMAKE_SOURCE_DIR}/src
                                                   ${CMAKE_SOURCE_DIR}/tests/coll)
target_link_libraries(test_netns_grow PRIVATE tutti_static)
add_executable(test_netns_two ${CMAKE_CURRENT_LIST_DIR}/test_netns_two.c)
target_include_directories(test_netns_two PRIVATE ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_netns_two PRIVATE tutti_static)
add_executable(tcp_raw_bw ${CMAKE_CURRENT_LIST_DIR}/tcp_raw_bw.c)
target_link_libraries(tcp_raw_bw PRIVATE pthread)

foreach(algo default Ring Direct)
  add_test(NAME tcp.procs.${algo} COMMAND test_coll_procs 2,3,4 ${algo})
  set_tests_properties(tcp.procs.${algo} PROPERTIES TIMEOUT 300
                       ENVIRONMENT "NCCL_SHM_DISABLE=1;TUTTI_TIMEOUT=60")
endforeach()

# Two threads of one process, each driving its own communicator over TCP at
# once (test_netns_two): small calls on the callers' own path, large ones
# through the proxies, every result checked (in the sanitizers' lists:
# ranks as threads, so TSan follows them).
add_test(NAME tcp.two.threads COMMAND test_netns_two threads 2 60)
set_tests_properties(tcp.two.threads PROPERTIES TIMEOUT 300
                     ENVIRONMENT "NCCL_SHM_DISABLE=1;TUTTI_TIMEOUT=60")

# The same, encrypted (ncclSetEncryption): bootstrap and TCP through util/seal.c.
add_test(NAME tcp.procs.encrypted COMMAND test_coll_procs 2,3 default)
set_tests_properties(tcp.procs.encrypted PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "NCCL_SHM_DISABLE=1;TUTTI_TIMEOUT=60;TEST_PSK=tcp-procs-encrypted-0123456789abcdef")

set(TUTTI_NETNS_RUN bash ${CMAKE_CURRENT_LIST_DIR}/run.sh $<TARGET_FILE:tuttirun>
    $<TARGET_FILE:test_netns_job> $<TARGET_FILE:tcp_raw_bw>)
foreach(shape "2 2" "3 1" "4 2")
  string(REPLACE " " "x" name "${shape}")
  separate_arguments(args UNIX_COMMAND "${shape}")
  add_test(NAME netns.job.${name} COMMAND ${TUTTI_NETNS_RUN} job ${args})
  add_test(NAME netns.job.${name}.ifname COMMAND ${TUTTI_NETNS_RUN} job ${args} eth0)
  list(APPEND TUTTI_NETNS_TESTS netns.job.${name} netns.job.${name}.ifname)
endforeach()
# One-sided operations between hosts: an all-to-all of puts and a relay of
# put + signal around the ring, byte for byte (within a host over SHM).
foreach(shape "2 1" "3 1" "2 2")
  string(REPLACE " " "x" name "${shape}")
  separate_arguments(args UNIX_COMMAND "${shape}")
  add_test(NAME netns.rma.${name} COMMAND ${TUTTI_NETNS_RUN} rma ${args})
  list(APPEND TUTTI_NETNS_TESTS netns.rma.${name})
endforeach()
foreach(how kill link)
  add_test(NAME netns.cut.${how} COMMAND ${TUTTI_NETNS_RUN} cut ${how})
  list(APPEND TUTTI_NETNS_TESTS netns.cut.${how})
endforeach()
# ncclCommGrow across hosts: 2 hosts grow to 3 (a process started in the
# third), then shrink back to 2; every collective at each step.
add_test(NAME netns.grow COMMAND ${TUTTI_NETNS_RUN} grow $<TARGET_FILE:test_netns_grow>)
list(APPEND TUTTI_NETNS_TESTS netns.grow)
# The same across hosts: 2 hosts run it checked; 3 hosts loop until host 2
# is killed mid-call, and each survivor's two threads must name it.
foreach(how run kill)
  add_test(NAME netns.two.${how} COMMAND ${TUTTI_NETNS_RUN} two ${how} $<TARGET_FILE:test_netns_two>)
  list(APPEND TUTTI_NETNS_TESTS netns.two.${how})
endforeach()
add_test(NAME netns.stall COMMAND ${TUTTI_NETNS_RUN} stall)
add_test(NAME netns.trials COMMAND ${TUTTI_NETNS_RUN} trials 5)
list(APPEND TUTTI_NETNS_TESTS netns.stall netns.trials)
# The same hosts talking through tutti's network plugin (libnccl-net-tutti.so
# loaded by NCCL_NET_PLUGIN): the network transport instead of TCP.
set(TUTTI_NETNS_PLUGIN_ENV "NET_PLUGIN=$<TARGET_FILE:nccl_net_tutti>")
add_test(NAME netns.plugin.job.2x2 COMMAND ${TUTTI_NETNS_RUN} job 2 2)
add_test(NAME netns.plugin.job.3x1 COMMAND ${TUTTI_NETNS_RUN} job 3 1)
foreach(how kill link)
  add_test(NAME netns.plugin.cut.${how} COMMAND ${TUTTI_NETNS_RUN} cut ${how})
endforeach()
add_test(NAME netns.plugin.trials COMMAND ${TUTTI_NETNS_RUN} trials 3)
add_test(NAME netns.plugin.grow COMMAND ${TUTTI_NETNS_RUN} grow $<TARGET_FILE:test_netns_grow>)
add_test(NAME netns.plugin.rma.2x1 COMMAND ${TUTTI_NETNS_RUN} rma 2 1)
add_test(NAME netns.plugin.rma.3x1 COMMAND ${TUTTI_NETNS_RUN} rma 3 1)
set(TUTTI_NETNS_PLUGIN_TESTS netns.plugin.job.2x2 netns.plugin.job.3x1 netns.plugin.cut.kill
    netns.plugin.cut.link netns.plugin.trials netns.plugin.grow netns.plugin.rma.2x1
    netns.plugin.rma.3x1)
set_tests_properties(${TUTTI_NETNS_PLUGIN_TESTS} PROPERTIES ENVIRONMENT "${TUTTI_NETNS_PLUGIN_ENV}")
list(APPEND TUTTI_NETNS_TESTS ${TUTTI_NETNS_PLUGIN_TESTS})
add_test(NAME netns.bw COMMAND ${TUTTI_NETNS_RUN} bw)
set_tests_properties(${TUTTI_NETNS_TESTS} netns.bw PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77
                     LABELS netns)
# Numbers worth comparing need the machine to themselves.
set_tests_properties(netns.bw PROPERTIES RUN_SERIAL TRUE)
# Where the subject is the way between hosts (an interface named, the
# plugin) rather than the reductions, the matrix runs one type of each
# element size (test_netns_job's TEST_TYPES); netns.job.* run every type.
set_property(TEST netns.job.2x2.ifname netns.job.3x1.ifname netns.job.4x2.ifname
             netns.plugin.job.2x2 netns.plugin.job.3x1 APPEND PROPERTY ENVIRONMENT TEST_TYPES=sizes)
# The chunks' cut points between hosts (TEST_CUTS, test_netns_job.c), where
# a host holds one rank and two (4x2's 8 ranks on 2 cores doubled its time).
set_property(TEST netns.job.2x2 netns.job.3x1 APPEND PROPERTY ENVIRONMENT TEST_CUTS=1)
# ncclSetEncryption across hosts (tests/netns/enc.sh): the matrix with the
# key on every rank (and through a network plugin, which stays outside the
# encryption and must say so), a rank with another key, a record altered as
# it is sent, a relay flipping a bit of the root's answer, OpenSSL hidden,
# and a tap on the wire that fails the job if any record's nonce repeats.
set(TUTTI_NETNS_ENC bash ${CMAKE_CURRENT_LIST_DIR}/enc.sh $<TARGET_FILE:tuttirun>
    $<TARGET_FILE:test_netns_job>)
add_test(NAME netns.enc.job.2x2 COMMAND ${TUTTI_NETNS_ENC} job 2 2)
add_test(NAME netns.enc.job.3x1 COMMAND ${TUTTI_NETNS_ENC} job 3 1)
add_test(NAME netns.enc.plugin.job.2x1 COMMAND ${TUTTI_NETNS_ENC} job 2 1)
set_tests_properties(netns.enc.plugin.job.2x1 PROPERTIES ENVIRONMENT "${TUTTI_NETNS_PLUGIN_ENV}")
foreach(what wrongkey flip relay hidden nonces)
  add_test(NAME netns.enc.${what} COMMAND ${TUTTI_NETNS_ENC} ${what})
endforeach()
set_property(TEST netns.enc.job.3x1 netns.enc.plugin.job.2x1 APPEND PROPERTY ENVIRONMENT
             TEST_TYPES=sizes)
set_tests_properties(netns.enc.job.2x2 netns.enc.job.3x1 netns.enc.plugin.job.2x1
                     netns.enc.wrongkey netns.enc.flip netns.enc.relay netns.enc.hidden
                     netns.enc.nonces
                     PROPERTIES TIMEOUT 180 SKIP_RETURN_CODE 77 LABELS netns)
