# megahost_add_plugin(<name> SOURCES <files...> [LIBRARIES <targets...>]
#                     [OUTPUT_DIRECTORY <dir>])
#
# Builds a megahost plugin: a MODULE library named mh_<name>.so that links the
# SDK, exports only the entry symbol, resolves all its own dependencies
# (--no-undefined) and finds its shared libraries through its own RPATH, so
# the host can load it with RTLD_LOCAL from any folder. Sources may be C or
# C++. In megahost's own tree a plugin goes to the host's plugin folder and is
# installed with it, unless OUTPUT_DIRECTORY puts it elsewhere (test fixtures).
function(megahost_add_plugin name)
  cmake_parse_arguments(ARG "" "OUTPUT_DIRECTORY" "SOURCES;LIBRARIES" ${ARGN})
  add_library(${name} MODULE ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE megahost::sdk ${ARG_LIBRARIES})
  set_target_properties(${name} PROPERTIES
    PREFIX ""
    OUTPUT_NAME "mh_${name}"
    C_VISIBILITY_PRESET hidden
    CXX_VISIBILITY_PRESET hidden
    VISIBILITY_INLINES_HIDDEN ON
    BUILD_RPATH "$ORIGIN;$ORIGIN/../lib"
    INSTALL_RPATH "$ORIGIN;$ORIGIN/..")
  target_link_options(${name} PRIVATE "LINKER:--no-undefined")
  if(ARG_OUTPUT_DIRECTORY)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${ARG_OUTPUT_DIRECTORY}")
  elseif(DEFINED MEGAHOST_PLUGIN_DIR)
    set_target_properties(${name} PROPERTIES LIBRARY_OUTPUT_DIRECTORY "${MEGAHOST_PLUGIN_DIR}")
    install(TARGETS ${name} LIBRARY DESTINATION ${MEGAHOST_INSTALL_PLUGIN_DIR})
    # In-tree tests load every plugin, so they depend on all of them.
    set_property(GLOBAL APPEND PROPERTY MEGAHOST_PLUGIN_TARGETS ${name})
  endif()
endfunction()

# megahost_add_conformance_test(<plugin target> KIND <kernels|comm>
#                               COMPONENT <name> [OPTIONS <option=value>...])
#
# A ctest named <plugin target>_<name>_conforms that loads the built plugin
# as the host does and runs megahost/conformance.hpp's checks on the
# component (OPTIONS set its options, e.g. world_size=4 for a communicator).
set(MEGAHOST_CONFORMANCE_MAIN "${CMAKE_CURRENT_LIST_DIR}/megahost_conformance.cpp")
function(megahost_add_conformance_test plugin)
  cmake_parse_arguments(ARG "" "KIND;COMPONENT" "OPTIONS" ${ARGN})
  if(NOT TARGET megahost_conformance)
    add_executable(megahost_conformance "${MEGAHOST_CONFORMANCE_MAIN}")
    target_link_libraries(megahost_conformance PRIVATE megahost::sdk ${CMAKE_DL_LIBS} Threads::Threads)
  endif()
  add_test(NAME ${plugin}_${ARG_COMPONENT}_conforms
           COMMAND megahost_conformance $<TARGET_FILE:${plugin}> ${ARG_KIND} ${ARG_COMPONENT} ${ARG_OPTIONS})
endfunction()
