# Install the build under test, then build downstream consumers against the
# installed tree.
add_test(NAME install.consumers
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/install_test.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
          ${CMAKE_INSTALL_LIBDIR})
set_tests_properties(install.consumers PROPERTIES TIMEOUT 300)

# The Debian packages made from this build (cpack -G DEB), checked and
# unpacked into a temporary root, and what they hold run from there.
add_test(NAME install.deb
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/deb_test.sh ${CMAKE_SOURCE_DIR} ${CMAKE_BINARY_DIR}
          ${CMAKE_INSTALL_LIBDIR} ${CMAKE_CPACK_COMMAND} ${PROJECT_VERSION}-${TUTTI_DEB_RELEASE}
          ${TUTTI_PACKAGE_NCCL})
set_tests_properties(install.deb PROPERTIES TIMEOUT 240 SKIP_RETURN_CODE 77)
