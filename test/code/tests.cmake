rightsize_add_test(code_test
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/analysis_test.cc ${CMAKE_CURRENT_LIST_DIR}/memory_model_test.cc
          ${CMAKE_CURRENT_LIST_DIR}/model_zoo_test.cc ${CMAKE_CURRENT_LIST_DIR}/python_env_test.cc
  DEPS rightsize::code)
