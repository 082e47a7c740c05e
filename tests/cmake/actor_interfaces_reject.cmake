# The actors' typed interfaces (actors/interfaces.hpp, runtime/cluster/interfaces.hpp) make the compiler refuse a
# message an actor does not declare: compiles actor_interfaces_reject.cpp once per
# case; case 0 (only declared messages) must compile, each other case must fail with
# CAF's static assertion for it (so a case cannot pass by failing for another reason).
#   cmake -DCXX=<compiler> -DSOURCE_DIR=<repo> -P actor_interfaces_reject.cmake
set(snippet "${CMAKE_CURRENT_LIST_DIR}/actor_interfaces_reject.cpp")
set(expected
  "0:"
  "1:receiver does not accept given message"
  "2:receiver does not accept given message"
  "3:receiver does not accept given message"
  "4:wrong functor signature"
  "5:Cannot assign incompatible handle"
  "6:receiver does not accept given message"
  "7:receiver does not accept given message")
foreach(entry IN LISTS expected)
  string(FIND "${entry}" ":" colon)
  string(SUBSTRING "${entry}" 0 ${colon} case)
  math(EXPR from "${colon} + 1")
  string(SUBSTRING "${entry}" ${from} -1 assertion)
  execute_process(COMMAND "${CXX}" -std=c++23 -fsyntax-only -DCASE=${case} "-I${SOURCE_DIR}"
                          "-I${SOURCE_DIR}/runtime/include" "${snippet}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(case STREQUAL "0")
    if(NOT rc EQUAL 0)
      message(FATAL_ERROR "case 0 (declared messages only) does not compile:\n${err}")
    endif()
  elseif(rc EQUAL 0)
    message(FATAL_ERROR "case ${case} compiled: an undeclared message was accepted (see ${snippet})")
  else()
    string(FIND "${err}" "${assertion}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "case ${case} failed without '${assertion}':\n${err}")
    endif()
  endif()
endforeach()
