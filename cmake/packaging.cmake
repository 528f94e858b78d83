# How tutti is installed beyond its install() rules (the libraries' search
# path; tutti.pc, written at install time for the prefix it lands in), and
# the Debian packages of the install components (docs/packages.md).

# The libraries need no search path (they depend on system libraries only);
# CMAKE_INSTALL_RPATH is for the programs, which find libtutti.so.0 through it.
set_target_properties(tutti tutti_as_nccl PROPERTIES INSTALL_RPATH "")

# tutti.pc. Under a libdir the linker and loader search without being told
# (the Debian packages' /usr/lib/<multiarch>) it names the prefix and adds no
# rpath: Debian policy discourages rpaths to system directories, and pkg-config
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

# Debian packages, one per install component:
#   cpack -G DEB --config <build>/CPackConfig.cmake   (or the "package" target)
# libtutti0 holds the shared library; libtutti-dev the header, the libtutti.so
# link, the static library, tutti.pc and the CMake package; tutti-tools the
# programs; libtutti-nccl2 the library under NCCL's soname, in a directory of
# its own. The CUDA runtime is linked into the library statically and the
# driver is loaded only when a GPU is used: no package depends on CUDA.
set(TUTTI_DEB_MAINTAINER "tutti developers <tutti-dev@example.org>"
  CACHE STRING "The Maintainer field of the Debian packages")
if(NOT CMAKE_INSTALL_LIBDIR MATCHES "^lib/")
  message(STATUS "tutti: Debian packages install the library into /usr/${CMAKE_INSTALL_LIBDIR}; "
    "configure with -DCMAKE_INSTALL_PREFIX=/usr for the multiarch libdir")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME tutti)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_PACKAGE_DIRECTORY ${CMAKE_BINARY_DIR}/packages) # cpack -B DIR puts them elsewhere
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL runtime dev tools)
if(TUTTI_PACKAGE_NCCL)
  list(APPEND CPACK_COMPONENTS_ALL nccl-private)
endif()
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # <name>_<version>-<revision>_<arch>.deb
set(CPACK_DEBIAN_PACKAGE_RELEASE ${TUTTI_DEB_RELEASE})
set(TUTTI_DEB_VERSION ${PROJECT_VERSION}-${TUTTI_DEB_RELEASE})
set(CPACK_DEBIAN_PACKAGE_MAINTAINER ${TUTTI_DEB_MAINTAINER})
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
find_program(TUTTI_DPKG dpkg)
if(TUTTI_DPKG)
  execute_process(COMMAND ${TUTTI_DPKG} --print-architecture
    OUTPUT_VARIABLE CPACK_DEBIAN_PACKAGE_ARCHITECTURE OUTPUT_STRIP_TRAILING_WHITESPACE)
endif()

# Depends: what dpkg-shlibdeps finds the binaries need, when it is there;
# otherwise the C library of this machine (and C++'s, which the device
# code's host side needs), stated by hand.
find_program(TUTTI_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(TUTTI_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
  # tutti-ddp needs libtutti.so.0, which is in no installed package yet: found
  # here, and depended on by name below.
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${CMAKE_BINARY_DIR})
  set(TUTTI_DEB_SYSTEM_DEPENDS "")
else()
  execute_process(COMMAND getconf GNU_LIBC_VERSION OUTPUT_VARIABLE TUTTI_GLIBC
    OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  string(REGEX REPLACE "^glibc " "" TUTTI_GLIBC "${TUTTI_GLIBC}")
  set(TUTTI_DEB_SYSTEM_DEPENDS "libc6")
  if(TUTTI_GLIBC)
    set(TUTTI_DEB_SYSTEM_DEPENDS "libc6 (>= ${TUTTI_GLIBC})")
  endif()
  if(TUTTI_HAVE_CUDA)
    list(APPEND TUTTI_DEB_SYSTEM_DEPENDS libstdc++6 libgcc-s1)
  endif()
endif()
function(tutti_deb_depends component)
  list(JOIN ARGN ", " depends)
  set(CPACK_DEBIAN_${component}_PACKAGE_DEPENDS "${depends}" PARENT_SCOPE)
endfunction()

if(TUTTI_HAVE_CUDA)
  set(TUTTI_DEB_BUFFERS "on GPU buffers and on host buffers")
  set(TUTTI_DEB_CUDA "\n\nThe CUDA runtime is linked into the library, and the CUDA driver is\n\
loaded only when a communicator uses a GPU: it needs no CUDA package, and\n\
runs on machines without a GPU.")
else()
  set(TUTTI_DEB_BUFFERS "on host buffers (this build has no device executor)")
  set(TUTTI_DEB_CUDA "")
endif()
set(TUTTI_DEB_ABOUT "tutti speaks the NCCL 2.28 C API and ABI, so programs written for NCCL
run on it unmodified. Every collective of that API (AllReduce, Broadcast,
Reduce, AllGather, ReduceScatter, AlltoAll, Gather, Scatter, Send, Recv)
works ${TUTTI_DEB_BUFFERS},
between threads, processes and hosts, with errors that name the rank and
the reason.")

# libtutti0: libtutti.so.0. The shlibs file lets packages built against it
# depend on it (any version from this one on: the ABI is NCCL 2.28's); the
# trigger runs ldconfig once dpkg is done. (CPack's generated postinst and
# postrm call ldconfig as well: redundant, harmless.)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_NAME libtutti0)
set(CPACK_DEBIAN_RUNTIME_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_RUNTIME_DESCRIPTION "collective communication library with the NCCL API (shared library)
${TUTTI_DEB_ABOUT}${TUTTI_DEB_CUDA}

This package holds the shared library, libtutti.so.0.")
tutti_deb_depends(RUNTIME ${TUTTI_DEB_SYSTEM_DEPENDS})
file(WRITE ${CMAKE_BINARY_DIR}/debian/libtutti0/triggers "activate-noawait ldconfig\n")
file(WRITE ${CMAKE_BINARY_DIR}/debian/libtutti0/shlibs "libtutti 0 libtutti0 (>= ${PROJECT_VERSION})\n")
set(CPACK_DEBIAN_RUNTIME_PACKAGE_CONTROL_EXTRA
  ${CMAKE_BINARY_DIR}/debian/libtutti0/triggers ${CMAKE_BINARY_DIR}/debian/libtutti0/shlibs)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

# libtutti-dev: what building against it takes, for exactly that libtutti0.
set(CPACK_DEBIAN_DEV_PACKAGE_NAME libtutti-dev)
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "collective communication library with the NCCL API (development files)
${TUTTI_DEB_ABOUT}

This package holds the header nccl.h, the libtutti.so link, the static
library libtutti.a, the pkg-config file tutti.pc and the CMake package
(find_package(tutti), targets tutti::tutti and tutti::tutti_static).")
if(TUTTI_HAVE_CUDA)
  string(APPEND CPACK_DEBIAN_DEV_DESCRIPTION "
Linking the static library also takes the CUDA toolkit's cudart_static.")
endif()
tutti_deb_depends(DEV "libtutti0 (= ${TUTTI_DEB_VERSION})")

# tutti-tools: tutti-ddp links libtutti.so.0 and tutti-perf loads it, both
# the one built with them; tutti-plot is Python.
set(CPACK_DEBIAN_TOOLS_PACKAGE_NAME tutti-tools)
set(CPACK_DEBIAN_TOOLS_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_TOOLS_DESCRIPTION "launcher, benchmark and checks for the tutti collective library
${TUTTI_DEB_ABOUT}

This package holds its programs:
 tuttirun     starts a job's ranks, as torchrun does
 tutti-perf   nccl-tests-style benchmark and checker for NCCL-API libraries
 tutti-plot   plots tutti-perf's JSON results (SVG; PNG with rsvg-convert)
 tutti-check  what a machine has, and whether tutti works on it
 tutti-ras    where every rank of a running job is, and who holds it up
 tutti-ddp    example: data-parallel training of a small network
Each explains itself with --help.")
tutti_deb_depends(TOOLS "libtutti0 (= ${TUTTI_DEB_VERSION})" python3 ${TUTTI_DEB_SYSTEM_DEPENDS})
set(CPACK_DEBIAN_TOOLS_PACKAGE_SUGGESTS "librsvg2-bin")

# libtutti-nccl2: libnccl.so.2 in /usr/lib/<multiarch>/tutti, a directory the
# loader does not search. NVIDIA's libnccl2 ships the same file name in the
# libdir itself: installed there this package would have to conflict with it
# and take over every NCCL program on the machine. Beside it instead, both
# stay installed and a program gets tutti when started with LD_LIBRARY_PATH
# naming that directory. Hence no Conflicts, and no Provides: libnccl2 (the
# loader would not find this library for packages that depend on that).
set(CPACK_DEBIAN_NCCL-PRIVATE_PACKAGE_NAME libtutti-nccl2)
set(CPACK_DEBIAN_NCCL-PRIVATE_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_NCCL-PRIVATE_DESCRIPTION "tutti under NCCL's soname, for programs built against NCCL
${TUTTI_DEB_ABOUT}

This package holds the same library under NCCL's soname, libnccl.so.2, in
/usr/${CMAKE_INSTALL_LIBDIR}/tutti, where the loader does not look unless
told: it stays beside NVIDIA's libnccl2 and replaces it only for programs
started with LD_LIBRARY_PATH=/usr/${CMAKE_INSTALL_LIBDIR}/tutti.")
tutti_deb_depends(NCCL-PRIVATE ${TUTTI_DEB_SYSTEM_DEPENDS})

# [.] rather than an escaped dot: CPack writes these into a CMake file it reads
# again, where a backslash escape warns.
set(CPACK_SOURCE_IGNORE_FILES "/[.]git/" "/build[^/]*/")
include(CPack)
