# RAS end to end (docs/ras.md): jobs of 4 processes on host buffers, asked
# with tutti-ras while they run, or read from their flight records.
add_executable(ras_job ${CMAKE_CURRENT_LIST_DIR}/ras_job.c)
target_link_libraries(ras_job PRIVATE tutti)
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  foreach(case stall slow dead two record disabled verdicts)
    add_test(NAME ras.${case}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/ras_test.py
                     $<TARGET_FILE:ras_job> $<TARGET_FILE:tutti-ras> ${case})
    set_tests_properties(ras.${case} PROPERTIES TIMEOUT 60 ENVIRONMENT "TUTTI_TIMEOUT=20")
  endforeach()
  # RAS against a hostile neighbour: each case an attack on a running job
  # that must fail while the job keeps answering within 1 s.
  foreach(case squat forged_size forged_lines idle symlink other_user encrypted)
    add_test(NAME ras.${case}
             COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/ras_attack.py
                     $<TARGET_FILE:ras_job> $<TARGET_FILE:tutti-ras> ${case})
    set_tests_properties(ras.${case} PROPERTIES TIMEOUT 90 SKIP_RETURN_CODE 77
                         ENVIRONMENT "TUTTI_TIMEOUT=20")
  endforeach()
  # Across hosts (network namespaces, tests/netns/hosts.sh): the process
  # asked on host 0 gathers host 1's ranks over the network.
  add_test(NAME ras.netns
           COMMAND ${Python3_EXECUTABLE} ${CMAKE_CURRENT_LIST_DIR}/ras_test.py
                   $<TARGET_FILE:ras_job> $<TARGET_FILE:tutti-ras> netns
                   ${CMAKE_SOURCE_DIR}/tests/netns/hosts.sh)
  set_tests_properties(ras.netns PROPERTIES TIMEOUT 90 SKIP_RETURN_CODE 77
                       ENVIRONMENT "TUTTI_TIMEOUT=20")
endif()
