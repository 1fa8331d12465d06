# What `cmake --install build [--prefix P]` puts where (GNUInstallDirs): include/rwin/*.h,
# lib/librwin.so* (or librwin.a), lib/cmake/rwin/ (find_package), lib/pkgconfig/rwin.pc, bin/ (the
# programs), the Python package and share/doc/rwin. The public headers are installed by core/.
include(CMakePackageConfigHelpers)
set(RWIN_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/rwin)

install(TARGETS rwin EXPORT rwinTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR})
install(EXPORT rwinTargets NAMESPACE rwin:: DESTINATION ${RWIN_CMAKE_DIR})

# find_package(rwin): a static librwin.a's link interface names UCX, libibverbs, OpenSSL, Threads, ...
# (cmake/layers.cmake lists them), so the config file finds them again; a shared librwin.so needs none.
configure_package_config_file(cmake/rwinConfig.cmake.in ${CMAKE_CURRENT_BINARY_DIR}/rwinConfig.cmake
  INSTALL_DESTINATION ${RWIN_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_CURRENT_BINARY_DIR}/rwinConfigVersion.cmake
  COMPATIBILITY SameMajorVersion)   # as the SONAME: librwin.so.<major>
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rwinConfig.cmake ${CMAKE_CURRENT_BINARY_DIR}/rwinConfigVersion.cmake
  DESTINATION ${RWIN_CMAKE_DIR})

# pkg-config: prefix relative to the .pc file, so an installed tree can be moved. A static librwin.a
# lists its dependencies as Requires.private / Libs.private (pkg-config --static --libs rwin).
file(RELATIVE_PATH RWIN_PC_UP /p/${CMAKE_INSTALL_LIBDIR}/pkgconfig /p)
string(REGEX REPLACE "/$" "" RWIN_PC_UP "${RWIN_PC_UP}")
set(RWIN_PC_PRIVATE "")
if(NOT BUILD_SHARED_LIBS)
  list(JOIN RWIN_PC_REQUIRES_PRIVATE " " requires)
  list(JOIN RWIN_PC_LIBS_PRIVATE " " libs)
  set(RWIN_PC_PRIVATE "Requires.private: ${requires}\nLibs.private: ${libs}")
endif()
configure_file(cmake/rwin.pc.in ${CMAKE_CURRENT_BINARY_DIR}/rwin.pc @ONLY)
install(FILES ${CMAKE_CURRENT_BINARY_DIR}/rwin.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# The programs (RPATH $ORIGIN/../lib: CMAKE_INSTALL_RPATH in the top CMakeLists.txt). rwin-perf only
# with RWIN_BUILD_BENCH.
foreach(program rwinrun rwin-perf ring_shift rwin-info rwin-trace)
  if(TARGET ${program})
    install(TARGETS ${program} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

# Docs: README.md and docs/*.md keep their layout (README's links to docs/X.md still resolve).
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB RWIN_DOCS ${CMAKE_CURRENT_SOURCE_DIR}/docs/*.md)
install(FILES ${RWIN_DOCS} DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
