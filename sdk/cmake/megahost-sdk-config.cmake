include("${CMAKE_CURRENT_LIST_DIR}/megahost-sdk-targets.cmake")
include("${CMAKE_CURRENT_LIST_DIR}/MegahostPlugin.cmake")
