# `cmake --install BUILD --prefix P` (`make install PREFIX=P`): the public
# headers, libcge.so (SONAME libcge.so.<major>) and libcge.a, the cge CLI,
# its --help texts and docs/*.md, cge.pc and the CMake package
# (find_package(cge CONFIG) -> cge::cge, cge::cge_static).
# scripts/test-install.sh builds against the result.
include(CMakePackageConfigHelpers)

install(DIRECTORY ${CMAKE_SOURCE_DIR}/include/cge ${CGE_GEN_DIR}/include/cge
        DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} FILES_MATCHING PATTERN "*.h")
install(TARGETS cge cge_static EXPORT cgeTargets
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(TARGETS cge_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# Docs: each command's --help, as the installed CLI prints it, written by
# running the built CLI at install time (so the text cannot drift from the
# binary), and the guides in docs/.
set(CGE_CLI_COMMANDS compile run bench inspect dot profile op-check)
install(CODE "
  set(_dir \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/${CMAKE_INSTALL_DOCDIR}\")
  file(MAKE_DIRECTORY \"\${_dir}\")
  foreach(_cmd \"\" ${CGE_CLI_COMMANDS})
    if(_cmd STREQUAL \"\")
      set(_file \"\${_dir}/cge.txt\")
    else()
      set(_file \"\${_dir}/cge-\${_cmd}.txt\")
    endif()
    message(STATUS \"Installing: \${_file}\")
    execute_process(COMMAND \"$<TARGET_FILE:cge_cli>\" \${_cmd} --help
                    OUTPUT_FILE \"\${_file}\" RESULT_VARIABLE _rc)
    if(NOT _rc EQUAL 0)
      message(FATAL_ERROR \"cge \${_cmd} --help exited with \${_rc}\")
    endif()
  endforeach()
")
install(DIRECTORY ${CMAKE_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md")
install(FILES ${CMAKE_SOURCE_DIR}/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

# pkg-config. prefix is found from the .pc file's own place, so the installed
# tree can be moved (and `cmake --install --prefix` need not match
# CMAKE_INSTALL_PREFIX). Libs.private: what libcge.a needs besides itself.
set(_pcdir ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
file(RELATIVE_PATH CGE_PC_PREFIX_FROM_PCFILEDIR /prefix/${_pcdir} /prefix)
string(REGEX REPLACE "/$" "" CGE_PC_PREFIX_FROM_PCFILEDIR "${CGE_PC_PREFIX_FROM_PCFILEDIR}")
set(CGE_PC_LIBS_PRIVATE "-lprotobuf-c -lpthread -lm -ldl")
if(CGE_HAVE_DNNL)
  set(CGE_PC_LIBS_PRIVATE "-ldnnl ${CGE_PC_LIBS_PRIVATE}")
endif()
if(CGE_HAVE_MPI)
  foreach(_lib ${MPI_C_LIBRARIES})
    get_filename_component(_dir ${_lib} DIRECTORY)
    get_filename_component(_name ${_lib} NAME_WE)
    string(REGEX REPLACE "^lib" "" _name "${_name}")
    set(CGE_PC_LIBS_PRIVATE "-L${_dir} -l${_name} ${CGE_PC_LIBS_PRIVATE}")
  endforeach()
endif()
configure_file(${CMAKE_SOURCE_DIR}/cmake/cge.pc.in ${CMAKE_BINARY_DIR}/cge.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/cge.pc DESTINATION ${_pcdir})

# The CMake package.
set(_cmakedir ${CMAKE_INSTALL_LIBDIR}/cmake/cge)
install(EXPORT cgeTargets NAMESPACE cge:: DESTINATION ${_cmakedir})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/cgeConfig.cmake.in
                              ${CMAKE_BINARY_DIR}/cgeConfig.cmake INSTALL_DESTINATION ${_cmakedir})
# SameMajorVersion, as the SONAME: within a major version the API only grows.
write_basic_package_version_file(${CMAKE_BINARY_DIR}/cgeConfigVersion.cmake
                                 COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/cgeConfig.cmake ${CMAKE_BINARY_DIR}/cgeConfigVersion.cmake
        DESTINATION ${_cmakedir})
