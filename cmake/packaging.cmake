# Installation and the Debian packages (docs/install.md). Three CPack components, one package
# each: `cli` -> rightsize (the binary, man pages, bash and zsh completion, the price table),
# `agent` -> rightsize-agent and `server` -> rightsize-server (systemd units, /etc configuration
# as conffiles, maintainer scripts in deploy/debian/). Build them with `cpack -G DEB` in the
# build tree (or the `package` target); packaging.deb in test/deploy installs them for real.
include(GNUInstallDirs)

# Man pages and completion, generated from the CLI11 command definitions by the binary itself.
set(RIGHTSIZE_DOCS_DIR ${PROJECT_BINARY_DIR}/gendocs)
add_custom_command(
  OUTPUT ${RIGHTSIZE_DOCS_DIR}/man/rightsize.1.gz ${RIGHTSIZE_DOCS_DIR}/rightsize.bash
         ${RIGHTSIZE_DOCS_DIR}/_rightsize
  COMMAND ${CMAKE_COMMAND} -DRIGHTSIZE=$<TARGET_FILE:rightsize> -DOUT=${RIGHTSIZE_DOCS_DIR}
          -P ${PROJECT_SOURCE_DIR}/cmake/gendocs.cmake
  DEPENDS rightsize ${PROJECT_SOURCE_DIR}/cmake/gendocs.cmake
  COMMENT "Generating man pages and bash/zsh completion from the command definitions"
  VERBATIM)
add_custom_target(rightsize_docs ALL
  DEPENDS ${RIGHTSIZE_DOCS_DIR}/man/rightsize.1.gz ${RIGHTSIZE_DOCS_DIR}/rightsize.bash
          ${RIGHTSIZE_DOCS_DIR}/_rightsize)

install(TARGETS rightsize RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR} COMPONENT cli)
install(DIRECTORY ${RIGHTSIZE_DOCS_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}/man1
        COMPONENT cli FILES_MATCHING PATTERN "*.1.gz")
install(FILES ${RIGHTSIZE_DOCS_DIR}/rightsize.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME rightsize
        COMPONENT cli)
install(FILES ${RIGHTSIZE_DOCS_DIR}/_rightsize
        DESTINATION ${CMAKE_INSTALL_DATADIR}/zsh/vendor-completions COMPONENT cli)
# The built-in price table is compiled in; this copy is the starting point for --prices.
install(FILES share/prices.json DESTINATION ${CMAKE_INSTALL_DATADIR}/rightsize COMPONENT cli)
install(FILES README.md docs/install.md docs/slurm.md docs/api.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR} COMPONENT cli)

# The units name /usr/local/bin/rightsize (a hand install, docs/slurm.md); installed, they name
# the binary where this install put it (CMAKE_INSTALL_PREFIX is the packaging prefix under cpack).
set(RIGHTSIZE_UNIT_DIR /lib/systemd/system)
foreach(unit_component rightsize-agent.service:agent rightsize-serve.service:server
                       rightsize-ingest.service:server)
  string(REPLACE ":" ";" pair ${unit_component})
  list(GET pair 0 unit)
  list(GET pair 1 component)
  install(CODE "
    file(READ \"${PROJECT_SOURCE_DIR}/deploy/systemd/${unit}\" text)
    string(REPLACE \"/usr/local/bin/rightsize\" \"\${CMAKE_INSTALL_PREFIX}/bin/rightsize\" text \"\${text}\")
    file(WRITE \"\$ENV{DESTDIR}${RIGHTSIZE_UNIT_DIR}/${unit}\" \"\${text}\")
    message(STATUS \"Installing: \$ENV{DESTDIR}${RIGHTSIZE_UNIT_DIR}/${unit}\")"
    COMPONENT ${component})
endforeach()
install(FILES deploy/debian/agent/rightsize-agent.default DESTINATION /etc/default
        RENAME rightsize-agent COMPONENT agent)
install(FILES deploy/debian/server/serve.json DESTINATION /etc/rightsize COMPONENT server)
install(FILES deploy/debian/server/rightsize-serve.default DESTINATION /etc/default
        RENAME rightsize-serve COMPONENT server)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME rightsize)
set(CPACK_PACKAGE_VENDOR "rightsize")
set(CPACK_PACKAGE_CONTACT "rightsize maintainers <rightsize@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "find and recover the capacity that HPC and GPU jobs request but do not use")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL cli agent server)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The build keeps debug information (-g); the installed binary does not need it.
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEBIAN_CLI_PACKAGE_NAME rightsize)
set(CPACK_DEBIAN_AGENT_PACKAGE_NAME rightsize-agent)
set(CPACK_DEBIAN_SERVER_PACKAGE_NAME rightsize-server)
set(CPACK_COMPONENT_CLI_DESCRIPTION
    "rightsize command line\nReports, predictions, diagnoses and the agent and server, in one binary.")
set(CPACK_COMPONENT_AGENT_DESCRIPTION
    "rightsize agent as a systemd service\nPer-job telemetry on a compute node, shipped to rightsize-server.")
set(CPACK_COMPONENT_SERVER_DESCRIPTION
    "rightsize server and SLURM follower as systemd services\nThe HTTP API, the dashboard, /metrics and predictions.")
set(RIGHTSIZE_DEB_VERSION "${PROJECT_VERSION}")
set(CPACK_DEBIAN_AGENT_PACKAGE_DEPENDS "rightsize (= ${RIGHTSIZE_DEB_VERSION})")
set(CPACK_DEBIAN_SERVER_PACKAGE_DEPENDS "rightsize (= ${RIGHTSIZE_DEB_VERSION}), adduser")
# Maintainer scripts and conffiles: copied into the build tree so CPack finds each under its
# Debian name (control files must be named conffiles, postinst, prerm, postrm).
foreach(component agent server)
  set(dir ${PROJECT_BINARY_DIR}/debian/${component})
  set(extra)
  foreach(name conffiles postinst prerm postrm)
    configure_file(${PROJECT_SOURCE_DIR}/deploy/debian/${component}/${name} ${dir}/${name}
                   COPYONLY)
    list(APPEND extra ${dir}/${name})
  endforeach()
  string(TOUPPER ${component} upper)
  set(CPACK_DEBIAN_${upper}_PACKAGE_CONTROL_EXTRA ${extra})
endforeach()
include(CPack)
