# System dependencies (Debian 12 packages; scripts/install_deps.sh installs them).
find_package(Threads REQUIRED)

# CAF 0.17 ships no CMake config: declare imported targets by hand.
find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
find_library(CAF_IO_LIBRARY caf_io REQUIRED)
# The cluster's mutual TLS (runtime/cluster/cluster_tls.hpp): CAF's OpenSSL module.
find_library(CAF_OPENSSL_LIBRARY caf_openssl REQUIRED)
find_package(OpenSSL 3 REQUIRED)
if(NOT TARGET CAF::core)
  add_library(CAF::core SHARED IMPORTED)
  set_target_properties(CAF::core PROPERTIES IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR} INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(CAF::io SHARED IMPORTED)
  set_target_properties(CAF::io PROPERTIES IMPORTED_LOCATION ${CAF_IO_LIBRARY}
    INTERFACE_LINK_LIBRARIES CAF::core)
  add_library(CAF::openssl SHARED IMPORTED)
  set_target_properties(CAF::openssl PROPERTIES IMPORTED_LOCATION ${CAF_OPENSSL_LIBRARY}
    INTERFACE_LINK_LIBRARIES "CAF::io;OpenSSL::SSL")
endif()

find_package(nlohmann_json 3.10 REQUIRED)
find_package(Boost 1.74 REQUIRED)
# Logging (common/log.hpp; Debian libspdlog-dev, built against the system fmt).
find_package(spdlog 1.10 REQUIRED)
# Command-line parsing of the `arbor` CLI (header-only; Debian libcli11-dev). The
# installed package (arborConfig.cmake sets ARBOR_CLI OFF) does not need it.
if(NOT DEFINED ARBOR_CLI OR ARBOR_CLI)
  find_package(CLI11 2.1 REQUIRED)
endif()

find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h REQUIRED)
find_library(SENTENCEPIECE_LIBRARY sentencepiece REQUIRED)
if(NOT TARGET sentencepiece::sentencepiece)
  add_library(sentencepiece::sentencepiece SHARED IMPORTED)
  set_target_properties(sentencepiece::sentencepiece PROPERTIES
    IMPORTED_LOCATION ${SENTENCEPIECE_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${SENTENCEPIECE_INCLUDE_DIR})
endif()

if(ARBOR_TESTS)
  find_package(GTest REQUIRED)
endif()
if(ARBOR_BENCH)
  find_package(benchmark REQUIRED)
endif()
