# add_plan_test(<name> SOURCES <files...> LIBRARIES <impl targets...> [PLUGIN <module target>])
# A GoogleTest executable for a planning component; its tests are registered
# with ctest under their suite names when ctest runs. With PLUGIN, the built
# module's path is MH_TEST_PLUGIN for tests that load it like the host.
include(GoogleTest)

if(NOT TARGET plan_test_support)
  add_library(plan_test_support INTERFACE)
  target_include_directories(plan_test_support INTERFACE ${CMAKE_CURRENT_LIST_DIR})
  target_link_libraries(plan_test_support INTERFACE megahost::sdk GTest::gtest_main)
endif()

function(add_plan_test name)
  cmake_parse_arguments(ARG "" "PLUGIN" "SOURCES;LIBRARIES" ${ARGN})
  add_executable(${name} ${ARG_SOURCES})
  target_link_libraries(${name} PRIVATE plan_test_support ${ARG_LIBRARIES})
  if(ARG_PLUGIN)
    add_dependencies(${name} ${ARG_PLUGIN})
    target_compile_definitions(${name} PRIVATE MH_TEST_PLUGIN="$<TARGET_FILE:${ARG_PLUGIN}>")
    target_link_libraries(${name} PRIVATE ${CMAKE_DL_LIBS})
  endif()
  gtest_discover_tests(${name} DISCOVERY_MODE PRE_TEST)
endfunction()
