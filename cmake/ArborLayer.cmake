# arbor_add_layer(NAME DIR DEPS <targets...>)
# One static library per top-level folder, made of every .cpp below it (files are
# picked up at configure time, so adding a file needs no CMake edit). Files named
# *_avx512.cpp get the AVX-512 flags; the caller must dispatch to them at run time.
function(arbor_add_layer name)
  cmake_parse_arguments(ARG "" "" "DEPS;EXCLUDE" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  foreach(pattern IN LISTS ARG_EXCLUDE)
    list(FILTER srcs EXCLUDE REGEX "${pattern}")
  endforeach()
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<INSTALL_INTERFACE:include>)
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
    foreach(src IN LISTS srcs)
      if(src MATCHES "_avx512\\.cpp$")
        set_source_files_properties(${src} PROPERTIES COMPILE_OPTIONS "${ARBOR_AVX512_FLAGS}")
      endif()
    endforeach()
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<INSTALL_INTERFACE:include>)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
  add_library(arbor::${name} ALIAS ${name})
endfunction()
