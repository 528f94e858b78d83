# Network plugins for unit.net_load.*: the mock plugin once per ABI version
# (libnccl-net-mock6.so ... libnccl-net-mock12.so), the mock again as a
# default libnccl-net.so in a folder of its own, a library with no table
# tutti can use; then the scenarios of tests/unit/test_net_load.c, each in
# its own process since a process loads its plugin once.
set(TUTTI_NET_TEST_SRC ${CMAKE_CURRENT_LIST_DIR})
set(TUTTI_NET_PLUGINS ${CMAKE_CURRENT_BINARY_DIR}/net_plugins)
set(TUTTI_NET_DEFAULT ${CMAKE_CURRENT_BINARY_DIR}/net_default)
set(TUTTI_NET_EMPTY ${CMAKE_CURRENT_BINARY_DIR}/net_empty)
set(TUTTI_NET_LOGS ${CMAKE_CURRENT_BINARY_DIR}/net_logs)
file(MAKE_DIRECTORY ${TUTTI_NET_EMPTY} ${TUTTI_NET_LOGS})

# The program exports mock_net_stats, where the mock counts what it saw.
target_sources(test_net_load PRIVATE ${TUTTI_NET_TEST_SRC}/net_traffic.c)
target_include_directories(test_net_load PRIVATE ${TUTTI_NET_TEST_SRC})
set_target_properties(test_net_load PROPERTIES ENABLE_EXPORTS ON)

function(tutti_net_plugin target output dir)
  add_library(${target} SHARED ${ARGN})
  target_compile_options(${target} PRIVATE -fvisibility=hidden)
  target_include_directories(${target} PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/include
                                               ${TUTTI_NET_TEST_SRC})
  target_link_libraries(${target} PRIVATE dl pthread)
  set_target_properties(${target} PROPERTIES OUTPUT_NAME ${output} LIBRARY_OUTPUT_DIRECTORY ${dir})
  add_dependencies(test_net_load ${target})
endfunction()

foreach(abi 6 7 8 9 10 11 12)
  tutti_net_plugin(tutti_mock_net_v${abi} nccl-net-mock${abi} ${TUTTI_NET_PLUGINS}
                   ${TUTTI_NET_TEST_SRC}/mock_plugin.c ${TUTTI_NET_TEST_SRC}/mock_core.c)
  target_compile_definitions(tutti_mock_net_v${abi} PRIVATE MOCK_ABI=${abi})
endforeach()
tutti_net_plugin(tutti_mock_net_default nccl-net ${TUTTI_NET_DEFAULT}
                 ${TUTTI_NET_TEST_SRC}/mock_plugin.c ${TUTTI_NET_TEST_SRC}/mock_core.c)
target_compile_definitions(tutti_mock_net_default PRIVATE MOCK_ABI=9)
# What NCCL_NET_PLUGIN=none (or NoNe) would load if it were taken for a name.
foreach(none none NoNe)
  tutti_net_plugin(tutti_mock_net_${none} nccl-net-${none} ${TUTTI_NET_DEFAULT}
                   ${TUTTI_NET_TEST_SRC}/mock_plugin.c ${TUTTI_NET_TEST_SRC}/mock_core.c)
  target_compile_definitions(tutti_mock_net_${none} PRIVATE MOCK_ABI=6)
endforeach()
tutti_net_plugin(tutti_mock_net_nosym nccl-net-nosym ${TUTTI_NET_PLUGINS}
                 ${TUTTI_NET_TEST_SRC}/nosym_plugin.c)
# v9 and v12 in one library.
tutti_net_plugin(tutti_mock_net_multi nccl-net-multi ${TUTTI_NET_PLUGINS}
                 ${TUTTI_NET_TEST_SRC}/mock_plugin.c ${TUTTI_NET_TEST_SRC}/mock_multi.c
                 ${TUTTI_NET_TEST_SRC}/mock_core.c)
target_compile_definitions(tutti_mock_net_multi PRIVATE MOCK_ABI=12)
# "first" as a file of that very name (v7) and as libnccl-net-first.so (v8):
# the name as given is tried first.
tutti_net_plugin(tutti_mock_net_first_given first ${TUTTI_NET_PLUGINS}
                 ${TUTTI_NET_TEST_SRC}/mock_plugin.c ${TUTTI_NET_TEST_SRC}/mock_core.c)
target_compile_definitions(tutti_mock_net_first_given PRIVATE MOCK_ABI=7)
set_target_properties(tutti_mock_net_first_given PROPERTIES PREFIX "" SUFFIX "")
tutti_net_plugin(tutti_mock_net_first_prefixed nccl-net-first ${TUTTI_NET_PLUGINS}
                 ${TUTTI_NET_TEST_SRC}/mock_plugin.c ${TUTTI_NET_TEST_SRC}/mock_core.c)
target_compile_definitions(tutti_mock_net_first_prefixed PRIVATE MOCK_ABI=8)

# unit.net_load.<name>: test_net_load with ARGS in the environment ENV
# (NCCL_NET_PLUGIN, LD_LIBRARY_PATH, MOCK_* ...), no NCCL_NET unless given.
function(tutti_net_test name)
  cmake_parse_arguments(T "" "" "ARGS;ENV" ${ARGN})
  add_test(NAME unit.net_load.${name} COMMAND test_net_load ${T_ARGS})
  set_tests_properties(unit.net_load.${name} PROPERTIES TIMEOUT 60 SKIP_RETURN_CODE 77
                       ENVIRONMENT "NCCL_NET=;NCCL_PROTO=;TUTTI_TIMEOUT=20;${T_ENV}")
endfunction()

set(plugins "LD_LIBRARY_PATH=${TUTTI_NET_PLUGINS}")
foreach(abi 6 7 8 9 10 11 12)
  tutti_net_test(v${abi} ARGS abi ${abi} ENV "NCCL_NET_PLUGIN=mock${abi};${plugins}")
endforeach()
foreach(abi 7 12)
  tutti_net_test(v${abi}.offload ARGS abi ${abi}
                 ENV "NCCL_NET_PLUGIN=mock${abi};${plugins};MOCK_OFFLOAD=1")
endforeach()
foreach(abi 6 12)
  tutti_net_test(v${abi}.dup ARGS abi ${abi} ENV "NCCL_NET_PLUGIN=mock${abi};${plugins};MOCK_DUP=1")
endforeach()
foreach(abi 9 12)
  tutti_net_test(v${abi}.vdev ARGS abi ${abi} ENV "NCCL_NET_PLUGIN=mock${abi};${plugins};MOCK_NDEV=3")
endforeach()

# NCCL_NET_PLUGIN's forms.
tutti_net_test(path ARGS loads 8 ${TUTTI_NET_PLUGINS}/libnccl-net-mock8.so
               ENV "NCCL_NET_PLUGIN=${TUTTI_NET_PLUGINS}/libnccl-net-mock8.so;LD_LIBRARY_PATH=${TUTTI_NET_EMPTY}")
tutti_net_test(list ARGS loads 10 ${TUTTI_NET_PLUGINS}/libnccl-net-mock10.so
               ENV "NCCL_NET_PLUGIN=nosuchplugin, mock10;${plugins}")
tutti_net_test(unsupported ARGS loads 11 ${TUTTI_NET_PLUGINS}/libnccl-net-mock11.so
               ENV "NCCL_NET_PLUGIN=nosym,mock11;${plugins}")
tutti_net_test(newest ARGS loads 12 ${TUTTI_NET_PLUGINS}/libnccl-net-multi.so
               ENV "NCCL_NET_PLUGIN=multi;${plugins}")
tutti_net_test(as_given ARGS loads 7 ${TUTTI_NET_PLUGINS}/first
               ENV "NCCL_NET_PLUGIN=first;${plugins}")
tutti_net_test(lib_name ARGS loads 8 ${TUTTI_NET_PLUGINS}/libnccl-net-first.so
               ENV "NCCL_NET_PLUGIN=libnccl-net-first.so;${plugins}")
tutti_net_test(nosym ARGS none ENV "NCCL_NET_PLUGIN=nosym;${plugins}")
foreach(none none NoNe)
  tutti_net_test(${none} ARGS none ENV "NCCL_NET_PLUGIN=${none};LD_LIBRARY_PATH=${TUTTI_NET_DEFAULT}")
endforeach()
tutti_net_test(default ARGS loads 9 ${TUTTI_NET_DEFAULT}/libnccl-net.so
               ENV "NCCL_NET_PLUGIN=;LD_LIBRARY_PATH=${TUTTI_NET_DEFAULT}")
tutti_net_test(unset ARGS unset ENV "NCCL_NET_PLUGIN=;LD_LIBRARY_PATH=${TUTTI_NET_EMPTY}")
tutti_net_test(missing ARGS missing
               ENV "NCCL_NET_PLUGIN=nosuchplugin;${plugins};NCCL_DEBUG=WARN;NCCL_DEBUG_FILE=${TUTTI_NET_LOGS}/missing.%p.log")

# NCCL_NET, and what plugins do in init.
tutti_net_test(netname ARGS netname ENV "NCCL_NET_PLUGIN=mock12;${plugins}")
tutti_net_test(ndev0 ARGS ndev0
               ENV "NCCL_NET_PLUGIN=mock11;${plugins};MOCK_NDEV=0;NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=NET;NCCL_DEBUG_FILE=${TUTTI_NET_LOGS}/ndev0.%p.log")
foreach(abi 9 12)
  tutti_net_test(init_fail.v${abi} ARGS init_fail ${abi}
                 ENV "NCCL_NET_PLUGIN=mock${abi};${plugins};MOCK_INIT_FAIL=1;NCCL_DEBUG=WARN;NCCL_DEBUG_FILE=${TUTTI_NET_LOGS}/init_fail${abi}.%p.log")
endforeach()
tutti_net_test(init_fail.default ARGS fallback
               ENV "NCCL_NET_PLUGIN=;LD_LIBRARY_PATH=${TUTTI_NET_DEFAULT};MOCK_INIT_FAIL=1")
tutti_net_test(proto ARGS proto ENV "NCCL_NET_PLUGIN=mock12;${plugins};MOCK_SETENV_PROTO=1")
tutti_net_test(log_info ARGS log_info
               ENV "NCCL_NET_PLUGIN=mock12;${plugins};NCCL_DEBUG=INFO;NCCL_DEBUG_SUBSYS=NET;NCCL_DEBUG_FILE=${TUTTI_NET_LOGS}/info.%p.log")
tutti_net_test(log_off ARGS log_off
               ENV "NCCL_NET_PLUGIN=mock12;${plugins};NCCL_DEBUG=;NCCL_DEBUG_FILE=${TUTTI_NET_LOGS}/off.%p.log")

# The network transport end to end: every collective x datatype x op x count
# (test_netns_job's matrix), three ranks as threads whose every pair crosses
# the in-process mock network (NCCL_SHM_DISABLE=1), over one ABI of each
# family (int sizes, size_t sizes, a context per communicator, v12; the
# other versions' adapters are unit.net_load's); and the deterministic
# reductions' fold over it.
# The two newest ABIs in every type (v12 at the chunks' cut points too); the
# older adapters in one type of each element size (TEST_TYPES=sizes: their
# subject is the adapter, not the reductions).
foreach(abi 6 9 11 12)
  add_test(NAME net.matrix.v${abi} COMMAND test_netns_job threads 3)
  set(types "")
  if(abi LESS 11)
    set(types ";TEST_TYPES=sizes")
  elseif(abi EQUAL 12)
    set(types ";TEST_CUTS=1") # the chunks' cut points too (test_netns_job.c)
  endif()
  set_tests_properties(net.matrix.v${abi} PROPERTIES TIMEOUT 300 ENVIRONMENT
    "NCCL_SHM_DISABLE=1;NCCL_NET=;NCCL_NET_PLUGIN=${TUTTI_NET_PLUGINS}/libnccl-net-mock${abi}.so;TUTTI_TIMEOUT=30${types}")
endforeach()
add_test(NAME net.ordered.v11 COMMAND test_ordered threads 3 ordered)
set_tests_properties(net.ordered.v11 PROPERTIES TIMEOUT 300 ENVIRONMENT
  "NCCL_SHM_DISABLE=1;NCCL_NET=;NCCL_NET_PLUGIN=${TUTTI_NET_PLUGINS}/libnccl-net-mock11.so;TUTTI_DETERMINISTIC=1;TUTTI_TIMEOUT=30")

# The socket network between processes: bench/net_bw.c (built here, as it
# needs the library; a short run keeps it working).
add_executable(net_bw ${CMAKE_SOURCE_DIR}/bench/net_bw.c)
target_include_directories(net_bw PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(net_bw PRIVATE tutti_static)
add_test(NAME net.bw_smoke COMMAND net_bw -b 1K -e 1M -f 32 -m 1)
set_tests_properties(net.bw_smoke PROPERTIES TIMEOUT 120 ENVIRONMENT "NCCL_SOCKET_IFNAME=lo")

# The record layer of ncclSetEncryption alone: bench/seal_bw.c (a short
# run keeps it working).
add_executable(seal_bw ${CMAKE_SOURCE_DIR}/bench/seal_bw.c)
target_include_directories(seal_bw PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(seal_bw PRIVATE tutti_static)
add_test(NAME net.seal_bw_smoke COMMAND seal_bw 1 4)
set_tests_properties(net.seal_bw_smoke PROPERTIES TIMEOUT 120)

# libnccl-net-tutti.so through dlopen and NCCL's tables, and what it exports.
find_program(TUTTI_NM nm)
add_executable(test_net_plugin ${CMAKE_CURRENT_LIST_DIR}/test_net_plugin.c
                               ${CMAKE_SOURCE_DIR}/tests/common/harness.c)
target_include_directories(test_net_plugin PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_SOURCE_DIR}/src
                                                   ${CMAKE_SOURCE_DIR}/tests/common)
target_link_libraries(test_net_plugin PRIVATE dl)
add_dependencies(test_net_plugin nccl_net_tutti)
add_test(NAME net.plugin COMMAND test_net_plugin $<TARGET_FILE:nccl_net_tutti> ${TUTTI_NM})
set_tests_properties(net.plugin PROPERTIES TIMEOUT 120)

# Two hosts as network namespaces: a stopped receiver is no failure, a cut
# one is reported by both ends within about 3 heartbeats.
add_executable(net_peer ${CMAKE_CURRENT_LIST_DIR}/net_peer.c)
target_include_directories(net_peer PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(net_peer PRIVATE tutti_static)
add_test(NAME net.cut COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/cut.sh $<TARGET_FILE:net_peer>)
set_tests_properties(net.cut PROPERTIES TIMEOUT 120 SKIP_RETURN_CODE 77 LABELS netns)

# The unit suites of the socket network again without worker threads (the
# default below 4 cores): every message on the control socket.
foreach(t socket socket_faults)
  add_test(NAME net.${t}.no_threads COMMAND test_net_${t})
  set_tests_properties(net.${t}.no_threads PROPERTIES TIMEOUT 300
                       ENVIRONMENT "NCCL_SOCKET_NTHREADS=0;TUTTI_TIMEOUT=20")
endforeach()

# And encrypted (ncclSetEncryption's record layer, util/seal.c, on every socket).
add_test(NAME net.socket.encrypted COMMAND test_net_socket)
set_tests_properties(net.socket.encrypted PROPERTIES TIMEOUT 300 ENVIRONMENT
                     "TEST_PSK=net-socket-encrypted-0123456789abcdef0123;TUTTI_TIMEOUT=20")

# One-sided operations over the network transport: ranks as threads whose
# every pair crosses the in-process mock network (one ABI of each family),
# and processes over tutti's socket network plugin.
foreach(abi 6 9 11 12)
  add_test(NAME net.rma.v${abi} COMMAND test_rma threads 2,3)
  set_tests_properties(net.rma.v${abi} PROPERTIES TIMEOUT 300 ENVIRONMENT
    "NCCL_SHM_DISABLE=1;NCCL_NET=;NCCL_NET_PLUGIN=${TUTTI_NET_PLUGINS}/libnccl-net-mock${abi}.so;TUTTI_TIMEOUT=30")
endforeach()
add_test(NAME net.rma.plugin COMMAND test_rma procs 2,3)
set_tests_properties(net.rma.plugin PROPERTIES TIMEOUT 300 ENVIRONMENT
  "NCCL_SHM_DISABLE=1;NCCL_NET=;NCCL_NET_PLUGIN=$<TARGET_FILE:nccl_net_tutti>;TUTTI_TIMEOUT=30")
