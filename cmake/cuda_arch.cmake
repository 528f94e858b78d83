# Which GPU architectures the device executor is compiled for.
#
#   TUTTI_CUDA_ARCHS=local     (default) the GPUs of this machine, as
#                              nvidia-smi reports them; sm_90 where there is
#                              none: a developer's build compiles one
#                              architecture, as fast as it can be.
#   TUTTI_CUDA_ARCHS=packages  what packages carry: machine code for every
#                              current NVIDIA data-centre and workstation GPU
#                              (A100 sm_80, A10/A40/RTX 30 sm_86, L4/L40S/RTX 40
#                              sm_89, H100/H200 sm_90, B200/GB200 sm_100,
#                              RTX PRO 6000/RTX 50 sm_120) and PTX of the
#                              newest, which the driver compiles for GPUs
#                              newer still.
#   TUTTI_CUDA_ARCHS=<list>    a CMake architecture list, e.g. "80;90-real".
#
# An explicit -DCMAKE_CUDA_ARCHITECTURES=... wins over all of these. The
# kernels use no architecture-specific instruction (the acquire/release and
# volatile accesses they need are sm_70's), so every architecture runs the
# same code.
set(TUTTI_CUDA_ARCHS "local" CACHE STRING
    "GPU architectures of the device code: local | packages | a CMake list")
set(TUTTI_PACKAGE_CUDA_ARCHS 80-real 86-real 89-real 90-real 100-real 120-real 120-virtual)

if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  if(TUTTI_CUDA_ARCHS STREQUAL "packages")
    set(CMAKE_CUDA_ARCHITECTURES ${TUTTI_PACKAGE_CUDA_ARCHS})
  elseif(TUTTI_CUDA_ARCHS STREQUAL "local")
    set(CMAKE_CUDA_ARCHITECTURES 90) # no GPU here: sm_90 machine code and compute_90 PTX
    find_program(TUTTI_NVIDIA_SMI nvidia-smi)
    if(TUTTI_NVIDIA_SMI)
      execute_process(COMMAND ${TUTTI_NVIDIA_SMI} --query-gpu=compute_cap --format=csv,noheader
        OUTPUT_VARIABLE caps RESULT_VARIABLE rc ERROR_QUIET TIMEOUT 20)
      if(rc EQUAL 0)
        string(REPLACE "." "" caps "${caps}")
        string(REGEX MATCHALL "[0-9]+" caps "${caps}")
        list(REMOVE_DUPLICATES caps)
        if(caps)
          set(CMAKE_CUDA_ARCHITECTURES ${caps})
        endif()
      endif()
    endif()
  else()
    set(CMAKE_CUDA_ARCHITECTURES ${TUTTI_CUDA_ARCHS})
  endif()
endif()
