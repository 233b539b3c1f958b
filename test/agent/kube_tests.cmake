# The DaemonSet agent's tests (agent --kubernetes); included by test/CMakeLists.txt after
# gpu_tests.cmake (it uses the fake NVML). The fake kubelet serves the PodResources messages
# generated for the agent (podresources_proto) and its pod list with cpp-httplib.
# The real-cgroup tests make kubepods groups under /sys/fs/cgroup, which every agent on the
# machine sees: run one at a time.
rightsize_add_test(agent_kube_test LOCK host_kubepods SOURCES ${CMAKE_CURRENT_LIST_DIR}/kube_agent_test.cc
                   DEPS rightsize::agent podresources_proto PkgConfig::HTTPLIB ZLIB::ZLIB)
target_compile_definitions(agent_kube_test PRIVATE FAKE_NVML_PATH="$<TARGET_FILE:fake_nvml>")
add_dependencies(agent_kube_test fake_nvml)
