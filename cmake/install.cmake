# `cmake --install build/release --prefix DIR`: a tree that works wherever DIR is moved.
#
#   DIR/bin/{baton,baton-router,baton-prefill,baton-decode}
#   DIR/bin/libbaton_cuda.so                  (CUDA builds: the --device cuda plugin)
#   DIR/share/baton/models/baton-tiny/        (the bundled model, HF directory)
#   DIR/share/baton/models/baton-tiny.gguf
#   DIR/share/doc/baton/{README.md,operations.md}
#
# The binaries link Baton's own libraries statically, so nothing else is installed and they
# need no RPATH; the bundled model is found relative to the running binary
# (common/install_paths.h, which spells the same share/baton/models). docs/operations.md,
# "Installing", says why the benchmarks are left out.
include(GNUInstallDirs)

set(BATON_INSTALLED_PROGRAMS baton baton-router baton-prefill baton-decode)
install(TARGETS ${BATON_INSTALLED_PROGRAMS} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The engine opens the plugin beside the binary (engine/device.cc), so it goes to bin/ too.
# It links the shared CUDA runtime and cuBLAS: its installed RUNPATH keeps the toolkit's
# library directory it was linked against (/usr/local/cuda/...), where a CUDA image or
# host has them; the CPU binaries never load it unless --device cuda asks.
if(TARGET baton_cuda)
  set_target_properties(baton_cuda PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
  install(TARGETS baton_cuda LIBRARY DESTINATION ${CMAKE_INSTALL_BINDIR})
  list(APPEND BATON_INSTALLED_PROGRAMS baton_cuda)
endif()

# Literal share/, not CMAKE_INSTALL_DATADIR: install_paths.cc looks exactly there.
install(DIRECTORY ${CMAKE_SOURCE_DIR}/models/baton-tiny DESTINATION share/baton/models)
install(FILES ${CMAKE_SOURCE_DIR}/models/baton-tiny.gguf DESTINATION share/baton/models)
install(FILES ${CMAKE_SOURCE_DIR}/README.md ${CMAKE_SOURCE_DIR}/docs/operations.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})

# Everything the rules above install, to build before `cmake --install` without building
# the tests and benchmarks: `cmake --build build/release --target baton-installed`.
add_custom_target(baton-installed)
add_dependencies(baton-installed ${BATON_INSTALLED_PROGRAMS})
