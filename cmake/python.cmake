# The Python package (pyproject.toml, python/tutti, docs/python.md): when
# scikit-build-core drives the build it sets SKBUILD, installs the component
# "python" only (install.components) into the package directory, and these
# rules say what that component holds: the two libraries as plain files under
# their sonames (a wheel cannot hold symbolic links, so libtutti.so.0.1.0 and
# its links would become three copies), the tools with their install RPATH
# ($ORIGIN/../lib), the header, and the package's _build.py.
if(SKBUILD)
  get_target_property(TUTTI_PY_TUTTI_SOVERSION tutti SOVERSION)
  get_target_property(TUTTI_PY_NCCL_SOVERSION tutti_as_nccl SOVERSION)
  get_target_property(TUTTI_PY_NCCL_VERSION tutti_as_nccl VERSION)
  set(TUTTI_PY_LIBTUTTI libtutti.so.${TUTTI_PY_TUTTI_SOVERSION})
  set(TUTTI_PY_LIBNCCL libnccl.so.${TUTTI_PY_NCCL_SOVERSION})
  # The libraries need no RUNPATH (their own dependencies are the system's);
  # installing them as targets replaces the build's RPATH placeholder.
  set_target_properties(tutti tutti_as_nccl PROPERTIES INSTALL_RPATH "")
  install(TARGETS tutti tutti_as_nccl LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
    NAMELINK_SKIP COMPONENT python)
  # Then the real file (libtutti.so.0.1.0) takes the place of its soname link.
  foreach(lib tutti tutti_as_nccl)
    install(CODE "
      set(dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_LIBDIR}\")
      file(RENAME \"\${dir}/$<TARGET_FILE_NAME:${lib}>\" \"\${dir}/$<TARGET_SONAME_FILE_NAME:${lib}>\")"
      COMPONENT python)
  endforeach()
  set(TUTTI_PY_TOOLS tuttirun tutti-perf tutti-check tutti-ras)
  install(TARGETS ${TUTTI_PY_TOOLS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT python)
  install(PROGRAMS ${CMAKE_SOURCE_DIR}/tools/tutti-perf/tutti-plot
    DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT python)
  install(FILES ${CMAKE_SOURCE_DIR}/include/nccl.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}
    COMPONENT python)

  # What the Python side cannot read from the files: where CMake put them and
  # how the libraries were built.
  if(TUTTI_HAVE_CUDA)
    set(TUTTI_PY_CUDA True)
    set(TUTTI_PY_CUDA_ARCHS "${CMAKE_CUDA_ARCHITECTURES}")
  else()
    set(TUTTI_PY_CUDA False)
    set(TUTTI_PY_CUDA_ARCHS "")
  endif()
  configure_file(${CMAKE_SOURCE_DIR}/python/_build.py.in
    ${CMAKE_BINARY_DIR}/python/_build.py @ONLY)
  install(FILES ${CMAKE_BINARY_DIR}/python/_build.py DESTINATION . COMPONENT python)
endif()
