# deploy/: the Grafana dashboard against the binaries' /metrics, and the Debian packages.

# Prometheus's PromQL grammar from npm (pinned by test/deploy/grafana/package-lock.json), for
# reading the metric names out of the dashboard's queries; `npm ci` in the build tree.
set(RIGHTSIZE_PROMQL_DIR ${CMAKE_CURRENT_BINARY_DIR}/grafana)
set(RIGHTSIZE_PROMQL_STAMP
    ${RIGHTSIZE_PROMQL_DIR}/node_modules/@prometheus-io/lezer-promql/package.json)
add_custom_command(
  OUTPUT ${RIGHTSIZE_PROMQL_STAMP}
  COMMAND ${CMAKE_COMMAND} -E make_directory ${RIGHTSIZE_PROMQL_DIR}
  COMMAND ${CMAKE_COMMAND} -E copy ${CMAKE_CURRENT_LIST_DIR}/grafana/package.json
          ${CMAKE_CURRENT_LIST_DIR}/grafana/package-lock.json ${RIGHTSIZE_PROMQL_DIR}
  COMMAND ${NPM} ci --no-audit --no-fund --ignore-scripts
  COMMAND ${CMAKE_COMMAND} -E touch ${RIGHTSIZE_PROMQL_STAMP}
  WORKING_DIRECTORY ${RIGHTSIZE_PROMQL_DIR}
  DEPENDS ${CMAKE_CURRENT_LIST_DIR}/grafana/package.json
          ${CMAKE_CURRENT_LIST_DIR}/grafana/package-lock.json
  COMMENT "Fetching Prometheus's PromQL grammar with npm ci"
  VERBATIM)
add_custom_target(promql_grammar ALL DEPENDS ${RIGHTSIZE_PROMQL_STAMP})

# Every panel of deploy/grafana/rightsize.json queries metrics that a running server and agent
# (GPU through the fake NVML) really export, and that a real Prometheus answers with data.
add_test(NAME deploy.grafana_dashboard
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/grafana_dashboard_test.sh $<TARGET_FILE:rightsize>
          ${CMAKE_CURRENT_SOURCE_DIR} ${PROJECT_SOURCE_DIR} $<TARGET_FILE:fake_nvml>
          ${RIGHTSIZE_PROMQL_DIR})
set_tests_properties(deploy.grafana_dashboard PROPERTIES TIMEOUT 240)

# The .deb packages built by CPack, installed into this system with dpkg, checked and removed
# (root; a lock keeps two runs apart).
add_test(NAME deploy.packaging_deb
  COMMAND bash ${CMAKE_CURRENT_LIST_DIR}/packaging_deb_test.sh ${PROJECT_BINARY_DIR}
          ${PROJECT_SOURCE_DIR} $<IF:$<BOOL:${RIGHTSIZE_STATIC_DEPS}>,static,shared>)
set_tests_properties(deploy.packaging_deb PROPERTIES TIMEOUT 300 RESOURCE_LOCK dpkg)
