# How tutti is installed beyond its install() rules: the libraries' search
# path, and tutti.pc, written at install time for the prefix it lands in.

# The libraries need no search path (they depend on the C library only);
# CMAKE_INSTALL_RPATH is for the programs, which find libtutti.so.0 through it.
set_target_properties(tutti tutti_as_nccl PROPERTIES INSTALL_RPATH "")

# tutti.pc. Under a libdir the linker and loader search without being told
# (the Debian packages' /usr/lib/<multiarch>) it names the prefix and adds no
# rpath: Debian policy forbids rpaths to system directories, and pkg-config
# drops -I/-L flags for them only when they are spelled plainly. Anywhere else
# it finds the prefix from where it lies (the tree may move) and adds
# -Wl,-rpath,${libdir}, so that what it links runs without LD_LIBRARY_PATH.
# The decision needs the prefix, known only when installing: cmake --install
# --prefix, or /usr under cpack.
file(RELATIVE_PATH TUTTI_PC_UP "/p/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/p")
string(REGEX REPLACE "/$" "" TUTTI_PC_UP "${TUTTI_PC_UP}")
file(CONFIGURE OUTPUT ${CMAKE_BINARY_DIR}/install-tutti-pc.cmake @ONLY CONTENT [=[
# Installs tutti.pc for the prefix being installed into (cmake/packaging.cmake).
set(PROJECT_VERSION "@PROJECT_VERSION@")
set(CMAKE_INSTALL_LIBDIR "@CMAKE_INSTALL_LIBDIR@")
set(CMAKE_INSTALL_INCLUDEDIR "@CMAKE_INSTALL_INCLUDEDIR@")
set(TUTTI_PC_CUDA "@TUTTI_PC_CUDA@")
set(system_libdirs "@CMAKE_C_IMPLICIT_LINK_DIRECTORIES@")
get_filename_component(prefix "${CMAKE_INSTALL_PREFIX}" ABSOLUTE)
get_filename_component(libdir "${prefix}/${CMAKE_INSTALL_LIBDIR}" ABSOLUTE)
list(FIND system_libdirs "${libdir}" system)
if(system GREATER -1)
  set(TUTTI_PC_PREFIX "${prefix}")
  set(TUTTI_PC_RPATH "")
else()
  set(TUTTI_PC_PREFIX "\${pcfiledir}/@TUTTI_PC_UP@")
  set(TUTTI_PC_RPATH "-Wl,-rpath,\${libdir} ")
endif()
# One staging file per destination: installs into several prefixes may run at once.
string(MD5 dest "$ENV{DESTDIR}${prefix}")
set(staged "@CMAKE_BINARY_DIR@/pkgconfig/${dest}/tutti.pc")
configure_file("@CMAKE_SOURCE_DIR@/cmake/tutti.pc.in" "${staged}" @ONLY)
file(INSTALL "${staged}" DESTINATION "${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}/pkgconfig")
]=])
install(SCRIPT ${CMAKE_BINARY_DIR}/install-tutti-pc.cmake COMPONENT dev)
