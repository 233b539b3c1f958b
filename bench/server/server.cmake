# Whole-server benchmarks of `rightsize serve` (docs/benchmarks.md, "Server"); both talk HTTP to
# a server they do not start (bench/run.sh starts one).
#   ingest_load     200 agents posting telemetry batches, as src/agent/shipper.cc does
#   job_page_bench  builds a 100,000-job / 50M-sample store, then times job pages over HTTP
add_executable(ingest_load server/ingest_load.cc)
target_link_libraries(ingest_load PRIVATE rightsize::agent rightsize::store PkgConfig::HTTPLIB ZLIB::ZLIB
                      fmt::fmt Threads::Threads)
target_compile_options(ingest_load PRIVATE ${RIGHTSIZE_WARNINGS})

add_executable(job_page_bench server/job_page_bench.cc)
target_link_libraries(job_page_bench PRIVATE rightsize::store PkgConfig::HTTPLIB fmt::fmt)
target_compile_options(job_page_bench PRIVATE ${RIGHTSIZE_WARNINGS})

# admission_load: the Kubernetes admission webhook at the apiserver's rate over HTTPS (it also
# makes its store: --make-store, from the admission tests' history).
add_executable(admission_load server/admission_load.cc)
target_link_libraries(admission_load PRIVATE rightsize::predict rightsize::store PkgConfig::HTTPLIB
                      yaml-cpp fmt::fmt Threads::Threads)
target_compile_definitions(admission_load PRIVATE
                           RIGHTSIZE_TEST_DATA_DIR="${PROJECT_SOURCE_DIR}/test")
target_compile_options(admission_load PRIVATE ${RIGHTSIZE_WARNINGS})

# fleet_load: issue 27's load test, a cluster of simulated agents (100 to 10,000 nodes of 8 GPUs,
# the agent's real metric set and batch encoding) and the job page on a 100,000-job store; run
# by bench/load_test.sh on any backend (docs/scale-load.md).
add_executable(fleet_load server/fleet_load.cc)
target_link_libraries(fleet_load PRIVATE rightsize::agent rightsize::remote_write PkgConfig::HTTPLIB
                      ZLIB::ZLIB fmt::fmt Threads::Threads)
target_compile_options(fleet_load PRIVATE ${RIGHTSIZE_WARNINGS})
