# The report tests; included by test/CMakeLists.txt, which defines rightsize_add_test.
rightsize_add_test(report_prices_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/prices_test.cc
                   DEPS rightsize::report)
rightsize_add_test(report_waste_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/waste_test.cc
                   DEPS rightsize::report rightsize::store)
rightsize_add_test(report_render_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/render_test.cc
                   DEPS rightsize::report)
rightsize_add_test(report_job_card_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_card_test.cc
                   DEPS rightsize::report)
rightsize_add_test(report_showback_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/showback_test.cc
                   DEPS rightsize::report)
rightsize_add_test(report_energy_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/energy_test.cc
                   DEPS rightsize::report)
rightsize_add_test(report_job_phases_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/job_phases_test.cc
                   DEPS rightsize::report rightsize::store)
