# Install, then build downstream consumers against the installed tree.
# The library is built whole, CUDA included: on 2 cores its device kernels alone
# take minutes, more while other builds share the cores.
add_test(NAME install.consumers COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_SOURCE_DIR})
set_tests_properties(install.consumers PROPERTIES TIMEOUT 900)
