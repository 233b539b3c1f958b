#include "code/python_tree.h"

#include <fmt/format.h>

#include "code/python_grammar.h"

namespace rightsize::code {
namespace {

struct ParserDeleter {
  void operator()(TSParser* p) const noexcept { ts_parser_delete(p); }
};

constexpr size_t kMaxErrorLines = 8;

void CollectErrors(TSNode root, std::vector<int>* lines) {
  if (!ts_node_has_error(root)) return;
  TSTreeCursor cursor = ts_tree_cursor_new(root);
  bool more = true;
  while (more && lines->size() < kMaxErrorLines) {
    TSNode n = ts_tree_cursor_current_node(&cursor);
    if (TypeOf(n) == "ERROR" || ts_node_is_missing(n)) {
      int line = LineOf(n);
      if (lines->empty() || lines->back() != line) lines->push_back(line);
    } else if (ts_node_has_error(n) && ts_tree_cursor_goto_first_child(&cursor)) {
      continue;  // only subtrees that hold an error are worth entering
    }
    while (!ts_tree_cursor_goto_next_sibling(&cursor)) {
      if (!ts_tree_cursor_goto_parent(&cursor)) {
        more = false;
        break;
      }
    }
  }
  ts_tree_cursor_delete(&cursor);
}

}  // namespace

StatusOr<PythonTree> PythonTree::Parse(std::string source) {
  if (source.size() > kMaxSourceBytes) {
    return Status::BadInput(
        fmt::format("{} bytes: larger than the {} bytes read", source.size(), kMaxSourceBytes));
  }
  std::unique_ptr<TSParser, ParserDeleter> parser(ts_parser_new());
  if (!ts_parser_set_language(parser.get(), tree_sitter_python())) {
    return Status::Internal(
        fmt::format("the tree-sitter runtime (language versions up to {}) cannot load the "
                    "Python grammar (version {})",
                    TREE_SITTER_LANGUAGE_VERSION, ts_language_version(tree_sitter_python())));
  }
  PythonTree t;
  t.source_ = std::make_unique<std::string>(std::move(source));
  t.tree_.reset(ts_parser_parse_string(parser.get(), nullptr, t.source_->data(),
                                       static_cast<uint32_t>(t.source_->size())));
  if (!t.tree_) return Status::Internal("tree-sitter returned no tree");
  CollectErrors(t.Root(), &t.error_lines_);
  return t;
}

std::string_view PythonTree::Text(TSNode node) const {
  if (ts_node_is_null(node)) return {};
  uint32_t begin = ts_node_start_byte(node);
  uint32_t end = ts_node_end_byte(node);
  if (end > source_->size() || begin > end) return {};
  return std::string_view(*source_).substr(begin, end - begin);
}

TSNode Field(TSNode n, std::string_view name) {
  return ts_node_child_by_field_name(n, name.data(), static_cast<uint32_t>(name.size()));
}

}  // namespace rightsize::code
