# `cmake --install build --prefix P`: kda's headers, libraries, tools and a
# CMake package, so that another project's find_package(Kda CONFIG) gives
# Kda::KdaDialect, Kda::KdaPasses, Kda::KdaLowering, Kda::KdaCAPI (and
# Kda::KdaPlugin, Kda::kda-opt, Kda::kda-run for their paths).
#
#   P/include/kda/{dialect,passes,lowering}/...  headers (+ generated .h.inc,
#                                                .td), included as from the
#                                                repository root
#   P/lib/    libKda*.a, libKdaCAPI.so, KdaPlugin.so
#   P/bin/    kda-opt, kda-run
#   P/lib/cmake/kda/KdaConfig.cmake, KdaTargets*.cmake
#
# Installed binaries find libMLIR.so through their RPATH (the LLVM library
# directory), and kda-run JIT-loads the OpenMP
# runtime and the C runner utilities from the same absolute LLVM paths as
# in the build tree. The top-level CMakeLists.txt keeps LLVM's helpers from
# installing anything themselves (LLVM_INSTALL_TOOLCHAIN_ONLY).
include(CMakePackageConfigHelpers)

set(KDA_INSTALL_INCLUDE_DIR include/kda)
set(KDA_INSTALL_CMAKE_DIR lib${LLVM_LIBDIR_SUFFIX}/cmake/kda)

foreach(dir dialect passes lowering)
  install(DIRECTORY ${PROJECT_SOURCE_DIR}/${dir}/
    DESTINATION ${KDA_INSTALL_INCLUDE_DIR}/${dir}
    FILES_MATCHING PATTERN "*.h" PATTERN "*.td")
  # Generated declarations (KdaOps.h.inc, Passes.h.inc, ...).
  install(DIRECTORY ${PROJECT_BINARY_DIR}/${dir}/
    DESTINATION ${KDA_INSTALL_INCLUDE_DIR}/${dir}
    FILES_MATCHING PATTERN "*.h.inc"
    PATTERN "CMakeFiles" EXCLUDE)
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/tools/capi/CAPI.h
  DESTINATION ${KDA_INSTALL_INCLUDE_DIR}/tools/capi)

# LLVM's helpers give installed binaries only $ORIGIN/../lib as RPATH;
# libMLIR.so and libLLVM.so live in the LLVM install's library directory.
foreach(target KdaCAPI KdaPlugin kda-opt kda-run)
  set_property(TARGET ${target} PROPERTY INSTALL_RPATH
    "\$ORIGIN/../lib${LLVM_LIBDIR_SUFFIX}" "${LLVM_LIBRARY_DIR}")
endforeach()
install(TARGETS KdaDialect KdaPasses KdaLowering KdaCAPI KdaPlugin
  EXPORT KdaTargets
  LIBRARY DESTINATION lib${LLVM_LIBDIR_SUFFIX}
  ARCHIVE DESTINATION lib${LLVM_LIBDIR_SUFFIX}
  INCLUDES DESTINATION ${KDA_INSTALL_INCLUDE_DIR})
install(TARGETS kda-opt kda-run
  EXPORT KdaTargets
  RUNTIME DESTINATION bin)
install(EXPORT KdaTargets
  NAMESPACE Kda::
  DESTINATION ${KDA_INSTALL_CMAKE_DIR})

configure_package_config_file(
  ${CMAKE_CURRENT_LIST_DIR}/KdaConfig.cmake.in
  ${PROJECT_BINARY_DIR}/cmake/KdaConfig.cmake
  INSTALL_DESTINATION ${KDA_INSTALL_CMAKE_DIR}
  PATH_VARS KDA_INSTALL_INCLUDE_DIR)
install(FILES ${PROJECT_BINARY_DIR}/cmake/KdaConfig.cmake
  DESTINATION ${KDA_INSTALL_CMAKE_DIR})
