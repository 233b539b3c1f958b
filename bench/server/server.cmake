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
