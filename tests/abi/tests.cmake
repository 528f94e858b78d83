# A program compiled against NVIDIA's nccl.h (from the CUDA toolkit) and
# linked to libtutti.so. Without the toolkit header the test reports itself
# skipped, loudly.
find_path(NVIDIA_NCCL_INCLUDE nccl.h PATHS /usr/local/cuda/include /usr/local/cuda-13.0/include
  NO_DEFAULT_PATH)
if(NVIDIA_NCCL_INCLUDE AND EXISTS ${NVIDIA_NCCL_INCLUDE}/cuda_runtime.h)
  add_library(abi_tutti_facts OBJECT ${CMAKE_CURRENT_LIST_DIR}/abi_tutti.c)
  target_include_directories(abi_tutti_facts PRIVATE ${CMAKE_SOURCE_DIR}/include ${CMAKE_CURRENT_LIST_DIR})
  add_executable(test_abi_nvidia ${CMAKE_CURRENT_LIST_DIR}/abi_nvidia.c $<TARGET_OBJECTS:abi_tutti_facts>)
  # NVIDIA's directory only: tutti's include/ must not shadow its nccl.h.
  target_include_directories(test_abi_nvidia PRIVATE ${NVIDIA_NCCL_INCLUDE} ${CMAKE_CURRENT_LIST_DIR})
  target_compile_options(test_abi_nvidia PRIVATE -Wno-deprecated-declarations)
  # Linked by file, so that tutti's public include directory does not come along.
  add_dependencies(test_abi_nvidia tutti)
  target_link_libraries(test_abi_nvidia PRIVATE $<TARGET_FILE:tutti> pthread)
  add_test(NAME abi.nvidia_header COMMAND test_abi_nvidia)
  set_tests_properties(abi.nvidia_header PROPERTIES TIMEOUT 120)
else()
  message(WARNING "NVIDIA's nccl.h (CUDA toolkit) not found: the ABI test is SKIPPED")
  add_test(NAME abi.nvidia_header COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: no CUDA toolkit nccl.h")
  set_tests_properties(abi.nvidia_header PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED")
endif()

# tutti exports every function of NVIDIA's libnccl.so.2 (from PyPI, cached
# in ~/.cache/tutti), pnccl aliases included, from both libraries: 2.32.6's
# (skipped, loudly, where PyPI does not have it), and 2.31.2's plus the one
# function 2.32 added.
add_test(NAME abi.exports COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/exports.sh ${CMAKE_SOURCE_DIR}
  $<TARGET_FILE:tutti> $<TARGET_FILE:tutti_as_nccl> 2.32.6)
set_tests_properties(abi.exports PROPERTIES TIMEOUT 600 RESOURCE_LOCK nvidia_nccl_wheel
  SKIP_RETURN_CODE 77)
add_test(NAME abi.exports_231 COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/exports.sh ${CMAKE_SOURCE_DIR}
  $<TARGET_FILE:tutti> $<TARGET_FILE:tutti_as_nccl> 2.31.2 ncclSetEncryption)
set_tests_properties(abi.exports_231 PROPERTIES TIMEOUT 600 RESOURCE_LOCK nvidia_nccl_wheel
  SKIP_RETURN_CODE 77)
# The same program as abi.nvidia_header, compiled against the nccl.h of
# NCCL 2.30.7, 2.31.2 and 2.32.6 from PyPI (each skipped, loudly, where PyPI
# does not have it).
foreach(v 2.30.7 2.31.2 2.32.6)
  string(REGEX REPLACE "^2\\.([0-9]+)\\..*" "2\\1" gen ${v})
  if(NVIDIA_NCCL_INCLUDE AND EXISTS ${NVIDIA_NCCL_INCLUDE}/cuda_runtime.h)
    add_test(NAME abi.nvidia_header_${gen} COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/header_nvidia.sh
      ${CMAKE_SOURCE_DIR} $<TARGET_FILE:tutti> ${CMAKE_C_COMPILER} ${NVIDIA_NCCL_INCLUDE} ${v})
    set_tests_properties(abi.nvidia_header_${gen} PROPERTIES TIMEOUT 600
      RESOURCE_LOCK nvidia_nccl_wheel SKIP_RETURN_CODE 77)
  else()
    add_test(NAME abi.nvidia_header_${gen} COMMAND ${CMAKE_COMMAND} -E echo
      "SKIPPED: no CUDA toolkit headers")
    set_tests_properties(abi.nvidia_header_${gen} PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED")
  endif()
endforeach()
