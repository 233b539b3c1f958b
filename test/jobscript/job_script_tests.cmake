rightsize_add_test(job_script_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_script_test.cc DEPS rightsize::jobscript)
