# The documents as reference material: every path and link in README.md,
# bench/RESULTS.md and docs/*.md that points into the repository exists, every
# bench/RESULTS.md section they cite is there, and the figures stay within
# their limits (scripts/check_doc_links.py says which).
find_package(Python3 COMPONENTS Interpreter)
if(Python3_Interpreter_FOUND)
  add_test(NAME docs.links COMMAND ${Python3_EXECUTABLE} ${CMAKE_SOURCE_DIR}/scripts/check_doc_links.py
                                   ${CMAKE_SOURCE_DIR})
  set_tests_properties(docs.links PROPERTIES TIMEOUT 60)
else()
  message(WARNING "no Python 3 interpreter: docs.links is SKIPPED")
  add_test(NAME docs.links COMMAND ${CMAKE_COMMAND} -E echo "SKIPPED: no Python 3 interpreter")
  set_tests_properties(docs.links PROPERTIES SKIP_REGULAR_EXPRESSION "SKIPPED")
endif()
