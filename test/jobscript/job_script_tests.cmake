rightsize_add_test(job_script_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_script_test.cc DEPS rightsize::jobscript)
rightsize_add_test(k8s_workload_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/k8s_workload_test.cc DEPS rightsize::jobscript)
