# Writes every target of the build with its sources and links to
# ${CMAKE_BINARY_DIR}/target_graph.tsv, for scripts/check_links.py: the layer rule checked
# against the link graph, so that a folder's headers are included only by targets that
# link its library. One line per target, tab-separated:
#   name  type  source_dir  sources(;)  link_libraries(;)  interface_link_libraries(;)
# Writing it changes no compile flag.

function(_baton_targets_under dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    _baton_targets_under(${sub} more)
    list(APPEND targets ${more})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

function(baton_write_target_graph)
  _baton_targets_under(${CMAKE_SOURCE_DIR} targets)
  set(lines "")
  foreach(t ${targets})
    get_target_property(type ${t} TYPE)
    if(NOT type MATCHES "^(STATIC_LIBRARY|SHARED_LIBRARY|MODULE_LIBRARY|OBJECT_LIBRARY|EXECUTABLE)$")
      continue()
    endif()
    get_target_property(dir ${t} SOURCE_DIR)
    get_target_property(sources ${t} SOURCES)
    get_target_property(links ${t} LINK_LIBRARIES)
    get_target_property(interface ${t} INTERFACE_LINK_LIBRARIES)
    foreach(v sources links interface)
      if(NOT ${v})
        set(${v} "")
      endif()
      # The list separator stays ';'; tabs and newlines cannot occur in these values.
    endforeach()
    string(APPEND lines "${t}\t${type}\t${dir}\t${sources}\t${links}\t${interface}\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/target_graph.tsv "${lines}")
endfunction()
