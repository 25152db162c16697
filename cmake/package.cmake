# CPack: Debian packages of the install components (tools/package.sh; it
# configures with -DCMAKE_INSTALL_PREFIX=/usr, the prefix a package needs):
#   o1d                component daemon: the programs, /etc/o1d, the units,
#                      sysusers.d and tmpfiles.d entries, pages, completions
#   libo1client3       component lib: libo1client.so.3 (SONAME, shlibs)
#   libo1client-dev    component dev: headers, the .so link, pkg-config,
#                      libo1client(3)
#   libo1client-cuda1  component cuda, in CUDA builds
# Dependencies on other packages come from dpkg-shlibdeps; those between
# these packages from the component graph (exact version).
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME o1d)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "o1d developers <o1d-dev@o1d.dev>")
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
set(CPACK_STRIP_FILES ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# libo1client.so.3 is not installed while o1d's programs are scanned
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS_PRIVATE_DIRS ${PROJECT_BINARY_DIR}/client)
set(CPACK_DEBIAN_ENABLE_COMPONENT_DEPENDS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS ON)
set(CPACK_DEBIAN_PACKAGE_GENERATE_SHLIBS_POLICY ">=")
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)

set(o1_packages daemon o1d lib libo1client3 dev libo1client-dev)
if(O1_HAVE_CUDA)
  list(APPEND o1_packages cuda libo1client-cuda1)
endif()
set(CPACK_COMPONENTS_ALL)

# The files each package carries for itself: copyright and changelog.
set(o1_deb ${PROJECT_SOURCE_DIR}/dist/deb)
set(o1_debgen ${PROJECT_BINARY_DIR}/dist/deb)
configure_file(${o1_deb}/changelog.in ${o1_debgen}/changelog @ONLY)
add_custom_command(OUTPUT ${o1_debgen}/changelog.gz
  COMMAND sh -c "gzip -9n < '${o1_debgen}/changelog' > '${o1_debgen}/changelog.gz'"
  DEPENDS ${o1_debgen}/changelog VERBATIM)
add_custom_target(o1_deb_changelog ALL DEPENDS ${o1_debgen}/changelog.gz)
while(o1_packages)
  list(POP_FRONT o1_packages component package)
  string(TOUPPER ${component} upper)
  list(APPEND CPACK_COMPONENTS_ALL ${component})
  set(CPACK_DEBIAN_${upper}_PACKAGE_NAME ${package})
  install(FILES ${o1_deb}/copyright ${o1_debgen}/changelog.gz
          DESTINATION ${CMAKE_INSTALL_DATADIR}/doc/${package}
          COMPONENT ${component})
endwhile()

set(CPACK_DEBIAN_DAEMON_PACKAGE_SECTION misc)
set(CPACK_DEBIAN_DAEMON_DESCRIPTION "resident LLM inference daemon
o1d keeps one Llama, Qwen2 or Mistral-family model loaded on a GPU (or
the CPU) and serves the processes of the same machine through
shared-memory rings. This package holds the daemon, o1ctl, o1-sidecar
(an OpenAI-compatible HTTP front), o1model and o1bench, the systemd
units and the configuration in /etc/o1d.")
set(CPACK_COMPONENT_DAEMON_DEPENDS lib)
set(CPACK_DEBIAN_LIB_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_LIB_DESCRIPTION "client library for the o1d inference daemon
libo1client connects to a local o1d and submits requests and reads tokens
through shared-memory rings.")
set(CPACK_DEBIAN_DEV_PACKAGE_SECTION libdevel)
set(CPACK_DEBIAN_DEV_DESCRIPTION "client library for o1d (development files)
The header <o1/client.h>, the pkg-config file o1client and the
libo1client(3) manual page, to build clients of a local o1d.")
set(CPACK_COMPONENT_DEV_DEPENDS lib)
set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION libs)
set(CPACK_DEBIAN_CUDA_DESCRIPTION "o1d client device outputs through CUDA IPC
libo1client-cuda maps the device output area a local o1d gives a
connection, so a GPU client reads each token's logits in place.")
set(CPACK_COMPONENT_CUDA_DEPENDS lib)

# Maintainer scripts and control files, with the installed paths.
set(o1_etc ${CMAKE_INSTALL_FULL_SYSCONFDIR}/o1d)
foreach(f o1d.conffiles o1d.postinst o1d.prerm o1d.postrm)
  string(REPLACE "o1d." "" name ${f})
  configure_file(${o1_deb}/${f}.in ${o1_debgen}/daemon/${name} @ONLY)
endforeach()
file(CHMOD ${o1_debgen}/daemon/postinst ${o1_debgen}/daemon/prerm
     ${o1_debgen}/daemon/postrm PERMISSIONS OWNER_READ OWNER_WRITE
     OWNER_EXECUTE GROUP_READ GROUP_EXECUTE WORLD_READ WORLD_EXECUTE)
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_EXTRA
    "${o1_debgen}/daemon/conffiles;${o1_debgen}/daemon/postinst;${o1_debgen}/daemon/prerm;${o1_debgen}/daemon/postrm")
set(CPACK_DEBIAN_DAEMON_PACKAGE_CONTROL_STRICT_PERMISSION ON)
configure_file(${o1_deb}/libo1client.triggers ${o1_debgen}/lib/triggers
               COPYONLY)
set(CPACK_DEBIAN_LIB_PACKAGE_CONTROL_EXTRA ${o1_debgen}/lib/triggers)
set(CPACK_DEBIAN_CUDA_PACKAGE_CONTROL_EXTRA ${o1_debgen}/lib/triggers)

include(CPack)
