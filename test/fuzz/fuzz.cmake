# Fuzzing every reader of untrusted bytes: one target per reader, test/fuzz/NAME_fuzz.cc, each
# feeding its bytes to the entry point the CLI or the server calls (docs/reliability.md).
#
# Always: NAME_fuzz_replay, the target driven by fuzz_replay.cc over test/fuzz/corpus/NAME plus
# deterministic mutations of it, as the ctest test fuzz.NAME_replay (any compiler, no libFuzzer),
# linked with the project's libraries as built.
# With -DRIGHTSIZE_FUZZ=ON and clang (a build tree of its own, where the top CMakeLists.txt
# compiles every library with ASan, UBSan and the fuzzer's coverage): NAME_fuzz, the libFuzzer
# binary, and the target `fuzz` that builds them all. `make fuzz-short` (part of `make test`)
# configures build-fuzz and runs each for a fixed number of executions
# (scripts/fuzz.sh); bench/fuzz.sh runs the long campaign. By hand:
#   CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DRIGHTSIZE_FUZZ=ON \
#     -DRIGHTSIZE_BUILD_BENCH=OFF
#   cmake --build build-fuzz --target swf_fuzz
#   mkdir -p /tmp/c && build-fuzz/test/swf_fuzz -max_len=65536 -timeout=10 /tmp/c \
#     test/fuzz/corpus/swf
# A crash leaves crash-<sha1> in the working directory: add it to corpus/NAME/ (the replay runs
# it in every build from then on) and fix the reader.
#
# rightsize_fuzz_target(NAME HOSTILE telemetry|json|text [MUTATIONS n] LIBS ... [SOURCES ...]):
# LIBS are linked; SOURCES (src/ files) are compiled into the target instead of linking their
# library, where that library would pull in much more (the server, diagnose) than the reader.
set(RIGHTSIZE_FUZZ_TARGETS "" CACHE INTERNAL "")
function(rightsize_fuzz_target name)
  cmake_parse_arguments(ARG "" "HOSTILE;MUTATIONS" "LIBS;SOURCES" ${ARGN})
  if(NOT ARG_MUTATIONS)
    set(ARG_MUTATIONS 300)
  endif()
  set(corpus ${CMAKE_CURRENT_SOURCE_DIR}/fuzz/corpus/${name})
  foreach(kind replay fuzz)
    if(kind STREQUAL "fuzz" AND NOT RIGHTSIZE_FUZZ)
      continue()
    endif()
    set(t ${name}_fuzz)
    set(main "")
    if(kind STREQUAL "replay")
      set(t ${name}_fuzz_replay)
      set(main fuzz/fuzz_replay.cc)
    endif()
    add_executable(${t} ${main} fuzz/${name}_fuzz.cc ${ARG_SOURCES})
    target_link_libraries(${t} PRIVATE ${ARG_LIBS} ZLIB::ZLIB)
    target_compile_options(${t} PRIVATE ${RIGHTSIZE_WARNINGS})
    if(ARG_SOURCES)
      target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/src)
    endif()
    if(kind STREQUAL "fuzz")
      target_link_options(${t} PRIVATE -fsanitize=fuzzer)
      set(RIGHTSIZE_FUZZ_TARGETS ${RIGHTSIZE_FUZZ_TARGETS} ${t} CACHE INTERNAL "")
    endif()
  endforeach()
  add_test(NAME fuzz.${name}_replay
           COMMAND ${name}_fuzz_replay --hostile=${ARG_HOSTILE} ${corpus} ${ARG_MUTATIONS})
  set_tests_properties(fuzz.${name}_replay PROPERTIES LABELS fuzz TIMEOUT 300)
endfunction()

# What `rightsize serve` decodes from agents (POST /api/v1/telemetry), gzip included.
rightsize_fuzz_target(telemetry HOSTILE telemetry
  SOURCES ${PROJECT_SOURCE_DIR}/src/server/telemetry.cc
  LIBS rightsize::core)
# `ingest swf`, `ingest sacct` / `ingest slurm`, `ingest clustercockpit`, `ingest sinfo`.
rightsize_fuzz_target(swf HOSTILE text LIBS rightsize::ingest)
rightsize_fuzz_target(sacct HOSTILE text MUTATIONS 200 LIBS rightsize::ingest)
rightsize_fuzz_target(clustercockpit HOSTILE text LIBS rightsize::ingest)
rightsize_fuzz_target(sinfo HOSTILE text LIBS rightsize::ingest rightsize::store)
# `ingest prometheus` answered with the fuzzed bytes through the reader's transport.
rightsize_fuzz_target(prometheus HOSTILE json MUTATIONS 100 LIBS rightsize::ingest)
# Batch scripts (`predict`, `submit`) and GRES lists.
rightsize_fuzz_target(jobscript HOSTILE text LIBS rightsize::jobscript rightsize::ingest)
# `diagnose`'s log scanner: only its sources, not diagnose's library (which links code/).
rightsize_fuzz_target(log_scan HOSTILE text MUTATIONS 60
  SOURCES ${PROJECT_SOURCE_DIR}/src/diagnose/log_scan.cc
          ${PROJECT_SOURCE_DIR}/src/diagnose/signatures.cc
          ${PROJECT_SOURCE_DIR}/src/diagnose/xid_catalog.cc
  LIBS rightsize::core PkgConfig::RE2 Threads::Threads)
# The admission webhook's review decoding and workload extraction, and `serve --config`.
rightsize_fuzz_target(admission HOSTILE json MUTATIONS 200
  LIBS rightsize::k8s rightsize::store rightsize::jobscript rightsize::ingest)
rightsize_fuzz_target(serve_config HOSTILE json LIBS rightsize::server)

if(RIGHTSIZE_FUZZ)
  add_custom_target(fuzz DEPENDS ${RIGHTSIZE_FUZZ_TARGETS})
endif()
