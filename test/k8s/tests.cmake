# The Kubernetes admission webhook: in process against real manifests (fixtures/ made by
# make_fixtures.sh with Debian's kubectl, manifests/ from the Kubeflow and JobSet examples).
rightsize_add_test(admission_test
  SOURCES k8s/admission_test.cc
  DEPS rightsize::k8s rightsize::predict rightsize::jobscript yaml-cpp)

# `rightsize serve` over HTTPS with a real TLS client, and the webhook's fail-open paths.
rightsize_add_test(webhook_tls_test
  SOURCES k8s/webhook_tls_test.cc
  DEPS rightsize::server rightsize::predict rightsize::store yaml-cpp PkgConfig::HTTPLIB)
target_compile_definitions(webhook_tls_test PRIVATE RIGHTSIZE_BINARY="$<TARGET_FILE:rightsize>")
add_dependencies(webhook_tls_test rightsize)
