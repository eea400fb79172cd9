include(CMakeFindDependencyMacro)
find_dependency(Threads)  # megahost_add_conformance_test's runner
include("${CMAKE_CURRENT_LIST_DIR}/megahost-sdk-targets.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/MegahostPlugin.cmake")
