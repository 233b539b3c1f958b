# The Kubernetes admission webhook: in process against real manifests (fixtures/ made by
# make_fixtures.sh with Debian's kubectl, manifests/ from the Kubeflow and JobSet examples).
rightsize_add_test(admission_test
  SOURCES k8s/admission_test.cc
  DEPS rightsize::k8s rightsize::predict rightsize::jobscript yaml-cpp)
