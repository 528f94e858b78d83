# The socket network between processes: bench/net_bw.c (built here, as it
# needs the library; a short run keeps it working).
add_executable(net_bw ${CMAKE_SOURCE_DIR}/bench/net_bw.c)
target_include_directories(net_bw PRIVATE ${CMAKE_SOURCE_DIR}/src)
target_link_libraries(net_bw PRIVATE tutti_static)
add_test(NAME net.bw_smoke COMMAND net_bw -b 1K -e 1M -f 32 -m 4)
set_tests_properties(net.bw_smoke PROPERTIES TIMEOUT 120 ENVIRONMENT "NCCL_SOCKET_IFNAME=lo")
