# The Python package (pyproject.toml, docs/python.md): a CPU-only wheel built
# from the source tree by pip and scikit-build-core (fetched from PyPI) into
# a build directory here, installed into fresh virtual environments, and used
# as a user would. python.wheel builds and installs it; the others use it.
find_package(Python3 COMPONENTS Interpreter)
if(NOT Python3_Interpreter_FOUND)
  message(STATUS "tutti: no Python 3 interpreter: the python.* tests are left out")
  return()
endif()

set(PY_WORK ${CMAKE_CURRENT_BINARY_DIR}/python)
# PyTorch from Debian (python3-torch) is seen by /usr/bin/python3 only.
set(PY_TORCH_PYTHON ${Python3_EXECUTABLE})
if(EXISTS /usr/bin/python3)
  set(PY_TORCH_PYTHON /usr/bin/python3)
endif()
set(PY_TEST bash ${CMAKE_CURRENT_LIST_DIR}/python_test.sh)

add_test(NAME python.wheel COMMAND ${PY_TEST} wheel ${CMAKE_SOURCE_DIR} ${PY_WORK} ${Python3_EXECUTABLE})
set_tests_properties(python.wheel PROPERTIES TIMEOUT 600 FIXTURES_SETUP python_wheel)
# The console scripts, the module's paths, and the C API through ctypes (one
# process, then two under tuttirun).
add_test(NAME python.tools COMMAND ${PY_TEST} tools ${CMAKE_SOURCE_DIR} ${PY_WORK})
# `python -m tutti.torch check` where Debian's PyTorch is visible.
add_test(NAME python.torch_check COMMAND ${PY_TEST} torch ${CMAKE_SOURCE_DIR} ${PY_WORK} ${PY_TORCH_PYTHON})
# `import tutti.torch` before, after and without a stand-in for libtorch_cuda.so.
add_library(tutti_py_fake_nccl SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_nccl.c)
set_target_properties(tutti_py_fake_nccl PROPERTIES OUTPUT_NAME nccl SOVERSION 2
  LIBRARY_OUTPUT_DIRECTORY ${PY_WORK}-fake-nccl)
foreach(fake tutti_py_fake_torch tutti_py_fake_torch2)
  add_library(${fake} SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_torch.c)
  target_link_libraries(${fake} PRIVATE tutti_py_fake_nccl)
  set_target_properties(${fake} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${PY_WORK}-fake-torch)
endforeach()
add_test(NAME python.switch COMMAND ${PY_TEST} switch ${CMAKE_SOURCE_DIR} ${PY_WORK}
  $<TARGET_FILE:tutti_py_fake_torch> $<TARGET_FILE:tutti_py_fake_torch2>
  $<TARGET_FILE:tutti_py_fake_nccl>)
# `pip install .` (not through a wheel file), reusing python.wheel's build.
add_test(NAME python.pip_install COMMAND ${PY_TEST} pip_install ${CMAKE_SOURCE_DIR} ${PY_WORK}
  ${Python3_EXECUTABLE})
# Today's PyTorch from PyPI (2.15.0, which pins NVIDIA's NCCL 2.30.7) imports
# on tutti and says so.
add_test(NAME python.torch_pypi COMMAND ${PY_TEST} torch_pypi ${CMAKE_SOURCE_DIR} ${PY_WORK}
  ${Python3_EXECUTABLE} 2.15.0)
set_tests_properties(python.torch_pypi PROPERTIES TIMEOUT 1200 FIXTURES_REQUIRED python_wheel
  FIXTURES_SETUP python_torch_pypi SKIP_RETURN_CODE 77 ENVIRONMENT "TUTTI_TIMEOUT=60")
# torch.distributed's `tutti` backend on CPU tensors, in that environment:
# every operation against Gloo on 1-4 ranks, DDP and FSDP2, a dying rank
# (whose peer must fail within TUTTI_TIMEOUT).
add_test(NAME python.torch_cpu COMMAND ${PY_TEST} torch_cpu ${CMAKE_SOURCE_DIR} ${PY_WORK} 2.15.0)
set_tests_properties(python.torch_cpu PROPERTIES TIMEOUT 600 FIXTURES_REQUIRED python_torch_pypi
  SKIP_RETURN_CODE 77 ENVIRONMENT "TUTTI_TIMEOUT=5")
set_tests_properties(python.tools python.torch_check python.switch python.pip_install PROPERTIES
  TIMEOUT 300 FIXTURES_REQUIRED python_wheel)
set_tests_properties(python.wheel python.tools python.torch_check python.switch python.pip_install
  PROPERTIES SKIP_RETURN_CODE 77 ENVIRONMENT "TUTTI_TIMEOUT=60")
