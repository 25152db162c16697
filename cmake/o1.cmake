# Helpers shared by every module's CMakeLists.txt.

# o1_add_test(NAME SOURCES... LIBS ...): one cmocka executable per tested
# facility, registered with CTest; exit code 77 is reported as skipped.
function(o1_add_test name)
  cmake_parse_arguments(T "" "" "SOURCES;LIBS;ARGS;LABELS" ${ARGN})
  add_executable(${name} ${T_SOURCES})
  target_link_libraries(${name} PRIVATE ${T_LIBS} PkgConfig::CMOCKA)
  target_compile_definitions(${name} PRIVATE
    O1_SOURCE_DIR="${PROJECT_SOURCE_DIR}"
    O1_SHARED_DIR="${PROJECT_SOURCE_DIR}/../shared")
  add_test(NAME ${name} COMMAND ${name} ${T_ARGS})
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 600)
  if(T_LABELS)
    set_tests_properties(${name} PROPERTIES LABELS "${T_LABELS}")
  endif()
endfunction()

# o1_add_fuzzer(NAME SOURCE LIBS ... CORPUS DIR): a libFuzzer harness when
# O1_FUZZ is on (clang), and always a replay test that runs the harness over
# its seed corpus with a plain driver, so every compiler checks the seeds.
# Both are silent (tests/fuzz/fuzz_quiet.c); tools/fuzz.sh runs them long.
function(o1_add_fuzzer name)
  cmake_parse_arguments(F "" "CORPUS" "SOURCES;LIBS" ${ARGN})
  set(quiet ${PROJECT_SOURCE_DIR}/tests/fuzz/fuzz_quiet.c)
  add_executable(${name}_replay ${F_SOURCES} ${quiet}
                 ${PROJECT_SOURCE_DIR}/tests/fuzz/replay_main.c)
  target_link_libraries(${name}_replay PRIVATE ${F_LIBS} o1_common)
  add_test(NAME ${name}_replay COMMAND ${name}_replay ${F_CORPUS})
  if(O1_FUZZ)
    add_executable(${name} ${F_SOURCES} ${quiet})
    target_compile_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_options(${name} PRIVATE -fsanitize=fuzzer)
    target_link_libraries(${name} PRIVATE ${F_LIBS} o1_common)
    add_dependencies(o1_fuzzers ${name})
  endif()
endfunction()
