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

# jit_frame: code in anonymous memory named by the program's own perf map, and a frame whose
# return address points into data (test/agent/jit_frame.c). The Python tests run Debian's
# python3.11 (python3-dev in scripts/install-deps.sh) on test/agent/python_prog.py.
add_executable(jit_frame ${CMAKE_CURRENT_LIST_DIR}/jit_frame.c)
target_compile_options(jit_frame PRIVATE -O1 -g -fno-omit-frame-pointer)
target_compile_definitions(agent_stacks_test PRIVATE JIT_FRAME_PATH="$<TARGET_FILE:jit_frame>"
                           PYTHON_PROG="${CMAKE_CURRENT_LIST_DIR}/python_prog.py")
target_link_libraries(agent_stacks_test PRIVATE PkgConfig::LIBDW)
add_dependencies(agent_stacks_test jit_frame)
