// PythonTree: one Python source file parsed by tree-sitter (the Python grammar from npm
// `tree-sitter-python`, compiled in), and the few node helpers the analysis needs.
//
// tree-sitter always returns a tree: code that does not parse gives ERROR and MISSING nodes
// around the broken part and ordinary nodes elsewhere, so a file with a syntax error still
// yields facts from its well-formed lines; `error_lines` says where it broke. The tree and the
// source it points into are owned together and live as long as the PythonTree (move-only).
// A PythonTree is immutable after Parse and may be read from several threads; nodes (TSNode)
// are plain values valid while their tree lives.
#pragma once

#include <tree_sitter/api.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "core/status.h"

namespace rightsize::code {

class PythonTree {
 public:
  // Fails only when tree-sitter cannot run at all (a grammar/runtime version mismatch: a bug
  // in the build) or the text is over kMaxSourceBytes.
  static StatusOr<PythonTree> Parse(std::string source);

  TSNode Root() const { return ts_tree_root_node(tree_.get()); }
  const std::string& source() const { return *source_; }
  // The text a node spans.
  std::string_view Text(TSNode node) const;
  // 1-based lines of the first few syntax errors (ERROR or MISSING nodes); empty when clean.
  const std::vector<int>& error_lines() const { return error_lines_; }

 private:
  struct TreeDeleter {
    void operator()(TSTree* t) const noexcept { ts_tree_delete(t); }
  };
  PythonTree() = default;
  // Held by pointer so that a move keeps the tree's byte offsets valid.
  std::unique_ptr<std::string> source_;
  std::unique_ptr<TSTree, TreeDeleter> tree_;
  std::vector<int> error_lines_;
};

inline constexpr size_t kMaxSourceBytes = 8 << 20;

// Node helpers: tiny wrappers over the C API, so the analysis reads as Python does.
// "" for a null node (an absent field or keyword), which ts_node_type cannot take.
inline std::string_view TypeOf(TSNode n) { return ts_node_is_null(n) ? "" : ts_node_type(n); }
inline int LineOf(TSNode n) { return static_cast<int>(ts_node_start_point(n).row) + 1; }
TSNode Field(TSNode n, std::string_view name);  // a null node when absent
inline uint32_t NamedCount(TSNode n) { return ts_node_named_child_count(n); }
inline TSNode Named(TSNode n, uint32_t i) { return ts_node_named_child(n, i); }

}  // namespace rightsize::code
