# The GPU suite (tests/gpu/README in test_gpu.c's header): built where the
# device executor is; on a host without a GPU it reports itself skipped.
if(TUTTI_HAVE_CUDA)
  add_executable(test_gpu ${CMAKE_CURRENT_LIST_DIR}/test_gpu.c ${CMAKE_CURRENT_LIST_DIR}/gpu_case.c
    ${CMAKE_CURRENT_LIST_DIR}/gpu_run.c ${CMAKE_CURRENT_LIST_DIR}/gpu_streams.c
    ${CMAKE_CURRENT_LIST_DIR}/gpu_mem.c ${CMAKE_CURRENT_LIST_DIR}/gpu_faults.c
    ${CMAKE_CURRENT_LIST_DIR}/gpu_probe.c ${CMAKE_CURRENT_LIST_DIR}/gpu_config.c
    ${CMAKE_SOURCE_DIR}/tests/coll/checker.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
  target_include_directories(test_gpu PRIVATE ${CMAKE_SOURCE_DIR}/src ${CMAKE_SOURCE_DIR}/tests/coll
    ${CMAKE_SOURCE_DIR}/tests/common
    ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_gpu PRIVATE tutti_static CUDA::cudart_static)
  add_test(NAME gpu.suite COMMAND test_gpu all)
  set_tests_properties(gpu.suite PROPERTIES TIMEOUT 3600 SKIP_RETURN_CODE 77
    ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0")

  # Deterministic reductions through every device path, against the rank-order fold.
  add_executable(test_gpu_ordered ${CMAKE_CURRENT_LIST_DIR}/test_gpu_ordered.c
    ${CMAKE_CURRENT_LIST_DIR}/gpu_probe.c
    ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
  target_include_directories(test_gpu_ordered PRIVATE ${CMAKE_SOURCE_DIR}/src
    ${CMAKE_SOURCE_DIR}/tests/common ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_gpu_ordered PRIVATE tutti_static CUDA::cudart_static m)
  add_test(NAME gpu.ordered COMMAND test_gpu_ordered all)
  set_tests_properties(gpu.ordered PROPERTIES TIMEOUT 1800 SKIP_RETURN_CODE 77
    ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0")

  # ncclCommSuspend / ncclCommResume / ncclCommMemStats on device buffers,
  # measured with cudaMemGetInfo: bench/suspend_mem.c on tutti's
  # libnccl.so.2 with --check, every mode (processes sharing GPU memory, ranks
  # as hosts through the network proxy, NCCL_P2P_DISABLE, NCCL_CUMEM_ENABLE=0).
  add_executable(test_gpu_suspend ${CMAKE_SOURCE_DIR}/bench/suspend_mem.c
    ${CMAKE_SOURCE_DIR}/bench/memjob.c ${CMAKE_CURRENT_LIST_DIR}/gpu_probe.c)
  target_include_directories(test_gpu_suspend PRIVATE ${CMAKE_SOURCE_DIR}/include
    ${CMAKE_CURRENT_LIST_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_gpu_suspend PRIVATE CUDA::cudart ${CMAKE_DL_LIBS})
  add_dependencies(test_gpu_suspend tutti_as_nccl)
  add_test(NAME gpu.suspend COMMAND test_gpu_suspend $<TARGET_FILE:tutti_as_nccl> all 2 --check)
  set_tests_properties(gpu.suspend PROPERTIES TIMEOUT 900 SKIP_RETURN_CODE 77
    ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0")

  # GPU memory per communicator (cudaMemGetInfo), bench/comm_mem.c on tutti's
  # libnccl.so.2 with --check: 2 processes sharing the GPUs as one host, four
  # communicators (one init, three splits), calls of every path's sizes, each
  # communicator within its layout's bound (docs/tuning.md,
  # TUTTI_COMM_MEMORY): lean (the default) 96 MiB per rank, fitted to 28 MiB
  # 32 MiB; MemStats equal to the measure, nothing left after destroy.
  add_executable(test_gpu_comm_mem ${CMAKE_SOURCE_DIR}/bench/comm_mem.c
    ${CMAKE_SOURCE_DIR}/bench/memjob.c ${CMAKE_CURRENT_LIST_DIR}/gpu_probe.c)
  target_include_directories(test_gpu_comm_mem PRIVATE ${CMAKE_SOURCE_DIR}/include
    ${CMAKE_CURRENT_LIST_DIR} ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_gpu_comm_mem PRIVATE CUDA::cudart ${CMAKE_DL_LIBS})
  add_dependencies(test_gpu_comm_mem tutti_as_nccl)
  add_test(NAME gpu.comm_mem.lean COMMAND test_gpu_comm_mem $<TARGET_FILE:tutti_as_nccl> procs 2 4
    --check 96 96)
  set_tests_properties(gpu.comm_mem.lean PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0")
  add_test(NAME gpu.comm_mem.fit COMMAND test_gpu_comm_mem $<TARGET_FILE:tutti_as_nccl> procs 2 4
    --check 32 32)
  set_tests_properties(gpu.comm_mem.fit PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0;TUTTI_COMM_MEMORY=29360128")

  # ncclCommGrow on device buffers: 2 processes grow to 4, then shrink to 3.
  add_executable(test_gpu_grow ${CMAKE_CURRENT_LIST_DIR}/test_gpu_grow.c
    ${CMAKE_CURRENT_LIST_DIR}/gpu_probe.c
    ${CMAKE_SOURCE_DIR}/tests/coll/team.c ${CMAKE_SOURCE_DIR}/tests/coll/every_coll.c
    ${CMAKE_SOURCE_DIR}/tests/coll/checker.c)
  target_include_directories(test_gpu_grow PRIVATE ${CMAKE_SOURCE_DIR}/src
    ${CMAKE_SOURCE_DIR}/tests/coll ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_gpu_grow PRIVATE tutti_static CUDA::cudart_static)
  add_test(NAME gpu.grow COMMAND test_gpu_grow)
  set_tests_properties(gpu.grow PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
    ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0")

  # One-sided operations on device buffers: processes on the GPUs, one host
  # and ranks as hosts (NCCL_HOSTID).
  add_executable(test_gpu_rma ${CMAKE_CURRENT_LIST_DIR}/test_gpu_rma.c
    ${CMAKE_CURRENT_LIST_DIR}/gpu_probe.c
    ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
  target_include_directories(test_gpu_rma PRIVATE ${CMAKE_SOURCE_DIR}/tests/common
    ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_gpu_rma PRIVATE tutti_static CUDA::cudart_static)
  foreach(mode host service hosts stall loop)
    add_test(NAME gpu.rma.${mode} COMMAND test_gpu_rma ${mode})
    set_tests_properties(gpu.rma.${mode} PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
      ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0")
  endforeach()

  # tutti-ras on device buffers: a rank whose kernel waits shows "waiting" in
  # its call, and the verdict names the rank that never launched it.
  add_executable(test_gpu_ras ${CMAKE_CURRENT_LIST_DIR}/test_gpu_ras.c
    ${CMAKE_CURRENT_LIST_DIR}/gpu_probe.c ${CMAKE_SOURCE_DIR}/tests/common/procs.c)
  target_include_directories(test_gpu_ras PRIVATE ${CMAKE_SOURCE_DIR}/tests/common
    ${CUDAToolkit_INCLUDE_DIRS})
  target_link_libraries(test_gpu_ras PRIVATE tutti_static CUDA::cudart_static)
  add_dependencies(test_gpu_ras tutti-ras)
  add_test(NAME gpu.ras COMMAND test_gpu_ras $<TARGET_FILE:tutti-ras>)
  set_tests_properties(gpu.ras PROPERTIES TIMEOUT 300 SKIP_RETURN_CODE 77
    ENVIRONMENT "TUTTI_TIMEOUT=60;NCCL_NVLS_ENABLE=0")

  # The device region's layout, checked on the host (no GPU needed).
  add_executable(test_dev_layout ${CMAKE_CURRENT_LIST_DIR}/test_layout.cu
    ${CMAKE_SOURCE_DIR}/tests/common/harness.c)
  target_include_directories(test_dev_layout PRIVATE ${CMAKE_SOURCE_DIR}/src
    ${CMAKE_SOURCE_DIR}/tests/common)
  target_link_libraries(test_dev_layout PRIVATE tutti_static CUDA::cudart_static)
  add_test(NAME unit.dev_layout COMMAND test_dev_layout)
  set_tests_properties(unit.dev_layout PROPERTIES TIMEOUT 60)
endif()
