# The stack sampler tests; included by test/CMakeLists.txt, which defines rightsize_add_test.
# They sample hot_loop, a CPU-bound child built with frame pointers (the kernel's call chains
# follow them) and -O1, so its functions stay distinct frames.
add_executable(hot_loop ${CMAKE_CURRENT_LIST_DIR}/hot_loop.c)
target_compile_options(hot_loop PRIVATE -O1 -g -fno-omit-frame-pointer)
target_link_libraries(hot_loop PRIVATE Threads::Threads)

rightsize_add_test(agent_stacks_test SOURCES ${CMAKE_CURRENT_LIST_DIR}/stacks_test.cc
                   DEPS rightsize::agent)
target_compile_definitions(agent_stacks_test PRIVATE HOT_LOOP_PATH="$<TARGET_FILE:hot_loop>")
add_dependencies(agent_stacks_test hot_loop)
