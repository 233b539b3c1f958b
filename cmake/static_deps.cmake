# Libraries linked from their static archives (Debian's -dev packages ship them beside the shared
# objects): gRPC and its Abseil, RE2, c-ares and upb, protobuf, SQLite, tree-sitter, yaml-cpp and
# snappy. Every `rightsize` command paid for loading them: gRPC alone brings 41 of Abseil's split
# shared objects, and the dynamic loader resolving their ~20,000 symbols was half of the
# process's start-up (docs/benchmarks.md). Linked in, their references are resolved by the
# linker once. They are used only by this program, so each is linked whole or not at all: a
# static copy beside a shared one that some other library loads would be two protobuf descriptor
# pools, two Abseil hash seeds. `build.static_deps` checks the program loads none of them.
#
# Done on the imported targets the find_package calls of this directory made (their locations
# and the libraries they name), so every target that links them follows, tests included: it
# must be included after the last find_package of a library it switches (test/ and bench/
# find only GoogleTest and Google Benchmark).

option(RIGHTSIZE_STATIC_DEPS
       "Link gRPC, Abseil, protobuf, RE2, SQLite, tree-sitter, yaml-cpp and snappy statically" ON)

set(RIGHTSIZE_STATIC_DEPS_NAMES
    "grpc\\+\\+|grpc|gpr|upb|address_sorting|cares|re2|protobuf|absl_[a-z0-9_]+|sqlite3"
    "|tree-sitter|yaml-cpp|snappy")
string(JOIN "" RIGHTSIZE_STATIC_DEPS_NAMES ${RIGHTSIZE_STATIC_DEPS_NAMES})

# The static archive standing for `item` (a path to a shared object, a bare library name as
# `re2`, or a flag as `-lre2`), in `out`; `item` itself when it is not one of the names or has no archive.
function(rightsize_static_archive item out)
  set(result "${item}")
  if(item MATCHES "^(/.*/)lib(${RIGHTSIZE_STATIC_DEPS_NAMES})\\.so(\\.[0-9.]+)?$")
    set(archive "${CMAKE_MATCH_1}lib${CMAKE_MATCH_2}.a")
    if(EXISTS "${archive}")
      set(result "${archive}")
    endif()
  elseif(item MATCHES "^(-l)?(${RIGHTSIZE_STATIC_DEPS_NAMES})$" AND NOT TARGET "${item}")
    set(name "${CMAKE_MATCH_2}")
    find_library(RIGHTSIZE_STATIC_${name} NAMES lib${name}.a)
    if(RIGHTSIZE_STATIC_${name})
      set(result "${RIGHTSIZE_STATIC_${name}}")
    endif()
  endif()
  set(${out} "${result}" PARENT_SCOPE)
endfunction()

function(rightsize_link_static_deps)
  get_directory_property(imported IMPORTED_TARGETS)
  foreach(target IN LISTS imported)
    get_target_property(type ${target} TYPE)
    if(type STREQUAL "SHARED_LIBRARY" OR type STREQUAL "UNKNOWN_LIBRARY")
      get_target_property(configs ${target} IMPORTED_CONFIGURATIONS)
      set(properties IMPORTED_LOCATION)
      if(configs)
        foreach(config IN LISTS configs)
          string(TOUPPER "${config}" config)
          list(APPEND properties IMPORTED_LOCATION_${config})
        endforeach()
      endif()
      foreach(property IN LISTS properties)
        get_target_property(location ${target} ${property})
        if(location)
          rightsize_static_archive("${location}" archive)
          if(NOT archive STREQUAL location)
            set_target_properties(${target} PROPERTIES ${property} "${archive}")
          endif()
        endif()
      endforeach()
    endif()
    if(NOT type STREQUAL "EXECUTABLE")
      get_target_property(links ${target} INTERFACE_LINK_LIBRARIES)
      if(links)
        set(mapped "")
        foreach(item IN LISTS links)
          rightsize_static_archive("${item}" archive)
          list(APPEND mapped "${archive}")
        endforeach()
        set_target_properties(${target} PROPERTIES INTERFACE_LINK_LIBRARIES "${mapped}")
      endif()
    endif()
  endforeach()
endfunction()

if(RIGHTSIZE_STATIC_DEPS AND NOT RIGHTSIZE_FUZZ)
  rightsize_link_static_deps()
endif()
