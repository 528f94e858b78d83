# The socket network between processes: bench/net_bw.c (built here, as it
# needs the library; a short run keeps it working).
add_executable(net_bw ${CMAKE_SOURCE_DIR}/bench/net_bw.c)
target_include_directories(net_bw PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(net_bw PRIVATE tutti_static)
add_test(NAME net.bw_smoke COMMAND net_bw -b 1K -e 1M -f 32 -m 1)
set_tests_properties(net.bw_smoke PROPERTIES TIMEOUT 120 ENVIRONMENT "NCCL_SOCKET_IFNAME=lo")

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
