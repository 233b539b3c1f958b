# Writes a C++ file that holds the learned fallback's model (src/diagnose/learned_fallback.h):
# cmake -DMODEL=<share/diagnose_fallback.ubj> -DOUT=<file.cc> -P embed_fallback_model.cmake
# A missing model file gives an empty model (diagnose then answers with the signatures alone).
set(bytes "")
set(size 0)
if(EXISTS "${MODEL}")
  file(READ "${MODEL}" hex HEX)
  string(LENGTH "${hex}" hex_len)
  math(EXPR size "${hex_len} / 2")
  # One string literal (g++ compiles a 5 MB brace list of chars far more slowly).
  string(REGEX REPLACE "([0-9a-f][0-9a-f])" "\\\\x\\1" bytes "${hex}")
endif()
file(WRITE "${OUT}.tmp"
     "// Generated from share/diagnose_fallback.ubj by cmake/embed_fallback_model.cmake.\n"
     "#include \"diagnose/learned_fallback.h\"\n\nnamespace rightsize {\nnamespace {\n"
     "const char kModel[] = \"${bytes}\";\n}  // namespace\n\n"
     "std::string_view EmbeddedFallbackModel() { return std::string_view(kModel, ${size}); }\n\n"
     "}  // namespace rightsize\n")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
