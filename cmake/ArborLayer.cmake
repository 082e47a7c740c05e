# arbor_add_layer(NAME DEPS <targets...> [EXCLUDE_DIRS <subfolders...>] [EXCLUDE <regexes...>])
# One static library per top-level folder, made of every .cpp below it (files are
# picked up at configure time, so adding a file needs no CMake edit). EXCLUDE_DIRS
# leaves out subfolders of the layer's folder (matched as path prefixes, so a checkout
# path that happens to contain the same name loses nothing); EXCLUDE leaves out files
# whose absolute path matches a regex.
function(arbor_add_layer name)
  cmake_parse_arguments(ARG "" "" "DEPS;EXCLUDE;EXCLUDE_DIRS" ${ARGN})
  file(GLOB_RECURSE srcs CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  foreach(pattern IN LISTS ARG_EXCLUDE)
    list(FILTER srcs EXCLUDE REGEX "${pattern}")
  endforeach()
  foreach(dir IN LISTS ARG_EXCLUDE_DIRS)
    set(prefix "${CMAKE_CURRENT_SOURCE_DIR}/${dir}/")
    set(kept)
    foreach(src IN LISTS srcs)
      string(FIND "${src}" "${prefix}" at)
      if(NOT at EQUAL 0)
        list(APPEND kept ${src})
      endif()
    endforeach()
    set(srcs ${kept})
  endforeach()
  if(srcs)
    add_library(${name} STATIC ${srcs})
    target_include_directories(${name} PUBLIC $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<INSTALL_INTERFACE:include>)
    target_link_libraries(${name} PUBLIC ${ARG_DEPS})
  else()
    add_library(${name} INTERFACE)
    target_include_directories(${name} INTERFACE $<BUILD_INTERFACE:${PROJECT_SOURCE_DIR}>
      $<INSTALL_INTERFACE:include>)
    target_link_libraries(${name} INTERFACE ${ARG_DEPS})
  endif()
  add_library(arbor::${name} ALIAS ${name})
endfunction()
