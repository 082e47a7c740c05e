include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

set(arbor_libraries arbor_common arbor_kernels arbor_cache arbor_model arbor_workflows
    arbor_actors arbor_runtime)
if(ARBOR_CUDA)
  list(APPEND arbor_libraries arbor_kernels_cuda)
endif()
install(TARGETS ${arbor_libraries} arbor EXPORT arborTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/runtime/include/arbor DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${PROJECT_SOURCE_DIR}/common/result.hpp ${PROJECT_SOURCE_DIR}/common/document_access.hpp
  ${PROJECT_SOURCE_DIR}/common/cache_stats.hpp
  ${PROJECT_SOURCE_DIR}/common/sampling_settings.hpp ${PROJECT_SOURCE_DIR}/common/status.hpp
  ${PROJECT_SOURCE_DIR}/common/token_usage.hpp ${PROJECT_SOURCE_DIR}/common/kv_event.hpp
  ${PROJECT_SOURCE_DIR}/common/enum_names.hpp DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/common)
install(EXPORT arborTargets NAMESPACE arbor:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/arbor)
install(FILES ${PROJECT_SOURCE_DIR}/cmake/ArborDeps.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/arbor)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/arborConfig.cmake.in
  ${PROJECT_BINARY_DIR}/arborConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/arbor)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/arborConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/arborConfig.cmake ${PROJECT_BINARY_DIR}/arborConfigVersion.cmake
  DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/arbor)
