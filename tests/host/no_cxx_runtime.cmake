# cmake -DPLUGIN=<file.so> -P no_cxx_runtime.cmake
# Fails when the plugin depends, directly or not, on the C++ runtime.
file(GET_RUNTIME_DEPENDENCIES LIBRARIES "${PLUGIN}"
     RESOLVED_DEPENDENCIES_VAR resolved UNRESOLVED_DEPENDENCIES_VAR unresolved)
foreach(library IN LISTS resolved unresolved)
  if(library MATCHES "libstdc\\+\\+|libc\\+\\+")
    message(FATAL_ERROR "${PLUGIN} needs the C++ runtime: ${library}")
  endif()
endforeach()
message(STATUS "${PLUGIN} needs: ${resolved} ${unresolved}")
