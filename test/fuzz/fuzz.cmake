# Fuzzing the decoders of what `rightsize serve` reads from the network (telemetry_fuzz.cc).
#
# Always: telemetry_fuzz_replay, the fuzz target driven by fuzz_replay.cc over the seed corpus
# plus deterministic mutations of it, as a ctest test (any compiler, no libFuzzer).
# With -DRIGHTSIZE_FUZZ=ON and clang: telemetry_fuzz, the libFuzzer binary, e.g.
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DRIGHTSIZE_FUZZ=ON
#   cmake --build build-fuzz --target telemetry_fuzz
#   mkdir -p /tmp/fuzz-corpus && build-fuzz/test/telemetry_fuzz -max_len=65536 -timeout=10 \
#     -rss_limit_mb=4096 /tmp/fuzz-corpus test/fuzz/corpus/telemetry
# A crash leaves crash-<sha1> in the working directory: add it to corpus/telemetry/.
#
# The decoder's sources are compiled into each target (not linked from rightsize::server) so
# that the fuzzer instruments them and the build needs neither the dashboard nor npm; keep the
# list in step with what src/server/telemetry.cc calls.
option(RIGHTSIZE_FUZZ "Build the libFuzzer targets (clang only)" OFF)

set(RIGHTSIZE_FUZZ_DECODER_SOURCES
    ${PROJECT_SOURCE_DIR}/src/server/telemetry.cc
    ${PROJECT_SOURCE_DIR}/src/core/job.cc
    ${PROJECT_SOURCE_DIR}/src/core/status.cc
    ${PROJECT_SOURCE_DIR}/src/core/units.cc)
set(RIGHTSIZE_FUZZ_CORPUS ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/telemetry)

add_executable(telemetry_fuzz_replay fuzz/fuzz_replay.cc fuzz/telemetry_fuzz.cc
               ${RIGHTSIZE_FUZZ_DECODER_SOURCES})
target_include_directories(telemetry_fuzz_replay PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_link_libraries(telemetry_fuzz_replay PRIVATE fmt::fmt nlohmann_json::nlohmann_json
                      ZLIB::ZLIB)
target_compile_options(telemetry_fuzz_replay PRIVATE ${RIGHTSIZE_WARNINGS})
add_test(NAME fuzz.telemetry_replay
  COMMAND telemetry_fuzz_replay ${RIGHTSIZE_FUZZ_CORPUS} 300)
set_tests_properties(fuzz.telemetry_replay PROPERTIES LABELS fuzz TIMEOUT 300)

if(RIGHTSIZE_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "RIGHTSIZE_FUZZ needs clang (libFuzzer): CC=clang CXX=clang++ cmake ...")
  endif()
  set(RIGHTSIZE_FUZZ_FLAGS -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer -g)
  add_executable(telemetry_fuzz fuzz/telemetry_fuzz.cc ${RIGHTSIZE_FUZZ_DECODER_SOURCES})
  target_include_directories(telemetry_fuzz PRIVATE ${PROJECT_SOURCE_DIR}/src)
  target_link_libraries(telemetry_fuzz PRIVATE fmt::fmt nlohmann_json::nlohmann_json ZLIB::ZLIB)
  target_compile_options(telemetry_fuzz PRIVATE ${RIGHTSIZE_WARNINGS} ${RIGHTSIZE_FUZZ_FLAGS})
  target_link_options(telemetry_fuzz PRIVATE ${RIGHTSIZE_FUZZ_FLAGS})
endif()
