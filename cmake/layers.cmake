# Folds the layers (RWIN_LAYERS, OBJECT libraries) into librwin: their objects go into librwin only;
# rwin_internal carries their include paths and usage requirements (never their objects) to tests,
# benchmarks, tools and the Python module, so no program links a second copy of a layer.
foreach(layer IN LISTS RWIN_LAYERS)
  get_target_property(type ${layer} TYPE)
  if(NOT type STREQUAL "OBJECT_LIBRARY")
    message(FATAL_ERROR "rwin: layer ${layer} is a ${type}; RWIN_LAYERS holds OBJECT libraries "
                        "(add_library(${layer} OBJECT ...))")
  endif()
  set_target_properties(${layer} PROPERTIES POSITION_INDEPENDENT_CODE ON)
  # BUILD_INTERFACE: the objects and usage requirements in the build; nothing of the layer is exported.
  target_link_libraries(rwin PRIVATE $<BUILD_INTERFACE:${layer}>)
  target_link_libraries(rwin_internal INTERFACE ${layer})
  # What the layer links from outside (UCX, libibverbs, OpenSSL, Threads, ...) rwin links itself, so a
  # static librwin.a's exported link interface names it.
  get_target_property(deps ${layer} LINK_LIBRARIES)
  foreach(dep IN LISTS deps)
    if(dep MATCHES "::" AND NOT TARGET ${dep})
      message(FATAL_ERROR "rwin: layer ${layer} links ${dep}, which the top CMakeLists.txt cannot see: "
                          "find it there (an imported target is seen only below the directory that found it)")
    endif()
    if(dep IN_LIST RWIN_LAYERS OR NOT TARGET ${dep})
      continue()
    endif()
    get_target_property(imported ${dep} IMPORTED)
    get_target_property(dep_type ${dep} TYPE)
    if(imported)
      target_link_libraries(rwin PRIVATE ${dep})
    elseif(NOT dep_type STREQUAL "INTERFACE_LIBRARY")  # a project INTERFACE target: headers only
      message(FATAL_ERROR "rwin: layer ${layer} links ${dep} (${dep_type}), which is not in RWIN_LAYERS: "
                          "make it an OBJECT library and add it to RWIN_LAYERS in the top CMakeLists.txt")
    endif()
  endforeach()
endforeach()

# What a static librwin.a's users must find again, from rwin's imported link items, for
# rwinConfig.cmake (RWIN_CONFIG_PACKAGES: find_dependency; RWIN_CONFIG_PKG_MODULES: PREFIX=module for
# pkg_check_modules, recreating PkgConfig::PREFIX) and rwin.pc (Requires.private, Libs.private).
set(RWIN_CONFIG_PACKAGES "")
set(RWIN_CONFIG_PKG_MODULES "")
set(RWIN_PC_REQUIRES_PRIVATE "")
set(RWIN_PC_LIBS_PRIVATE "")
get_target_property(rwin_links rwin LINK_LIBRARIES)
foreach(dep IN LISTS rwin_links)
  if(NOT TARGET ${dep})
    continue()
  endif()
  if(dep MATCHES "^PkgConfig::(.+)$")
    set(module ${${CMAKE_MATCH_1}_MODULE_NAME})
    if(NOT module)
      message(FATAL_ERROR "rwin: ${dep} has no ${CMAKE_MATCH_1}_MODULE_NAME (pkg_check_modules with one module)")
    endif()
    list(APPEND RWIN_CONFIG_PKG_MODULES "${CMAKE_MATCH_1}=${module}")
    list(APPEND RWIN_PC_REQUIRES_PRIVATE ${module})
  elseif(dep STREQUAL "Threads::Threads")
    list(APPEND RWIN_CONFIG_PACKAGES Threads)
    list(APPEND RWIN_PC_LIBS_PRIVATE -pthread)
  elseif(dep MATCHES "^OpenSSL::(Crypto|SSL)$")
    list(APPEND RWIN_CONFIG_PACKAGES OpenSSL)
    string(TOLOWER "lib${CMAKE_MATCH_1}" module)
    list(APPEND RWIN_PC_REQUIRES_PRIVATE ${module})
  else()
    message(FATAL_ERROR "rwin: librwin links ${dep}: say in cmake/layers.cmake how a static librwin.a's "
                        "users find it (find_dependency package, pkg-config module)")
  endif()
endforeach()
list(REMOVE_DUPLICATES RWIN_CONFIG_PACKAGES)
list(REMOVE_DUPLICATES RWIN_CONFIG_PKG_MODULES)
list(REMOVE_DUPLICATES RWIN_PC_REQUIRES_PRIVATE)
list(REMOVE_DUPLICATES RWIN_PC_LIBS_PRIVATE)
