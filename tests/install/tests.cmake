# Install the build under test, then build downstream consumers against the
# installed tree.
add_test(NAME install.consumers
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
          ${CMAKE_INSTALL_LIBDIR})
set_tests_properties(install.consumers PROPERTIES TIMEOUT 300)
