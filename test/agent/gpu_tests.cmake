# The GPU collector's tests; included by test/CMakeLists.txt, which defines rightsize_add_test.
#
# fake_nvml is a stand-in libnvidia-ml.so.1 (see fake_nvml.c) that the test loads by its full
# path, so the tests need no GPU and never pick up a real driver's library. It is built into a
# folder of its own so nothing that searches the test folder for libraries finds it by accident.
add_library(fake_nvml SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_nvml.c)
set_target_properties(fake_nvml PROPERTIES
  OUTPUT_NAME nvidia-ml
  SOVERSION 1
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_nvml)
target_compile_options(fake_nvml PRIVATE ${RIGHTSIZE_WARNINGS})
# The same fake playing an old or stripped-down library: optional entry points missing.
add_library(fake_nvml_minimal SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_nvml.c)
set_target_properties(fake_nvml_minimal PROPERTIES
  OUTPUT_NAME nvidia-ml
  SOVERSION 1
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_nvml_minimal)
target_compile_definitions(fake_nvml_minimal PRIVATE FAKE_NVML_MINIMAL)
target_compile_options(fake_nvml_minimal PRIVATE ${RIGHTSIZE_WARNINGS})

rightsize_add_test(agent_gpu_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/gpu_test.cc
                   DEPS rightsize::agent ${CMAKE_DL_LIBS})
target_compile_definitions(agent_gpu_test PRIVATE
  FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>"
  FAKE_NVML_MINIMAL_PATH="$<TARGET_FILE:fake_nvml_minimal>")
# The test loads the libraries at run time, so nothing links them: say they must be built first.
add_dependencies(agent_gpu_test fake_nvml fake_nvml_minimal)

# fake_dcgm is a stand-in libdcgm.so.4 (see fake_dcgm.c), loaded by its full path like fake_nvml,
# from a folder of its own. The DCGM tests use both fakes: DCGM's GPUs are matched to jobs
# through NVML's processes.
add_library(fake_dcgm SHARED ${CMAKE_CURRENT_LIST_DIR}/fake_dcgm.c)
set_target_properties(fake_dcgm PROPERTIES
  OUTPUT_NAME dcgm
  SOVERSION 4
  LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_dcgm)
target_compile_options(fake_dcgm PRIVATE ${RIGHTSIZE_WARNINGS})

rightsize_add_test(agent_dcgm_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/dcgm_test.cc
                   DEPS rightsize::agent ${CMAKE_DL_LIBS})
target_compile_definitions(agent_dcgm_test PRIVATE
  FAKE_DCGM_PATH="$<TARGET_FILE:fake_dcgm>"
  FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>")
add_dependencies(agent_dcgm_test fake_dcgm fake_nvml)

# Energy per job: the fake NVML's energy counter (and the minimal fake without the call), RAPL
# from fixture trees laid out like /sys/class/powercap, and this machine's real powercap folder.
rightsize_add_test(agent_energy_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/energy_test.cc
                   DEPS rightsize::agent rightsize::report)
target_compile_definitions(agent_energy_test PRIVATE
  FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>"
  FAKE_NVML_MINIMAL_PATH="$<TARGET_FILE:fake_nvml_minimal>")
add_dependencies(agent_energy_test fake_nvml fake_nvml_minimal)
