# Every folder is seen through an include root of its own, so that the compiler refuses a
# header of a library the target does not link. Headers are included by their path from
# the repository's top (#include "engine/engine.h"); a root is a directory under
# ${CMAKE_BINARY_DIR}/include_roots that holds only a symbolic link to one folder, at that
# path. A library exports its root PUBLIC, so its users see it, and through its PUBLIC
# links the roots of what its headers include; an executable keeps its root PRIVATE.
#
# A target's folder is the deepest one holding all its sources, widened to the parent while
# the parent holds headers of its own (kernels/cpu/*.cc implements kernels/*.h). Everything
# under tests/ shares one root, "tests": the test helpers are used across test folders.
# scripts/check_links.py still checks the finer rule (a header belongs to the target that
# compiles its .cc) and names the missing link.

set(BATON_INCLUDE_ROOTS ${CMAKE_BINARY_DIR}/include_roots)

# Sets ${out} to the include root that shows the repository folder ${path}, creating it.
function(baton_include_root path out)
  string(REPLACE "/" "_" key ${path})
  set(root ${BATON_INCLUDE_ROOTS}/${key})
  if(NOT IS_SYMLINK ${root}/${path})
    get_filename_component(parent ${root}/${path} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${path} ${root}/${path} SYMBOLIC)
  endif()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

function(_baton_folder_of_sources target out)
  get_target_property(dir ${target} SOURCE_DIR)
  get_target_property(sources ${target} SOURCES)
  set(folder "")
  set(first TRUE)
  foreach(s ${sources})
    if(s MATCHES "^\\$<")
      continue()
    endif()
    if(NOT IS_ABSOLUTE ${s})
      set(s ${dir}/${s})
    endif()
    cmake_path(IS_PREFIX CMAKE_BINARY_DIR ${s} NORMALIZE generated)
    file(RELATIVE_PATH rel ${CMAKE_SOURCE_DIR} ${s})
    if(generated OR rel MATCHES "^\\.\\./")  # in the build tree
      continue()
    endif()
    get_filename_component(d ${rel} DIRECTORY)
    if(first)
      set(folder ${d})
      set(first FALSE)
    endif()
    while(NOT folder STREQUAL "" AND NOT d STREQUAL folder AND NOT d MATCHES "^${folder}/")
      get_filename_component(folder ${folder} DIRECTORY)
    endwhile()
  endforeach()
  if(first)
    set(${out} "" PARENT_SCOPE)
    return()
  endif()
  if(folder MATCHES "^tests(/|$)")
    set(${out} tests PARENT_SCOPE)
    return()
  endif()
  if(folder STREQUAL "")
    message(FATAL_ERROR "${target}: its sources span top-level folders; give each folder its "
                        "own library (cmake/include_roots.cmake)")
  endif()
  while(folder MATCHES "/")
    get_filename_component(parent ${folder} DIRECTORY)
    file(GLOB parent_headers ${CMAKE_SOURCE_DIR}/${parent}/*.h ${CMAKE_SOURCE_DIR}/${parent}/*.cuh)
    if(NOT parent_headers)
      break()
    endif()
    set(folder ${parent})
  endwhile()
  set(${out} ${folder} PARENT_SCOPE)
endfunction()

# Gives every library and executable the root of its folder; call once every target exists.
function(baton_add_include_roots)
  _baton_targets_under(${CMAKE_SOURCE_DIR} targets)
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(type STREQUAL "EXECUTABLE")
      set(scope PRIVATE)
    elseif(type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY)$")
      set(scope PUBLIC)
    else()
      continue()
    endif()
    _baton_folder_of_sources(${t} folder)
    if(folder STREQUAL "")
      continue()
    endif()
    baton_include_root(${folder} root)
    target_include_directories(${t} ${scope} ${root})
  endforeach()
endfunction()
