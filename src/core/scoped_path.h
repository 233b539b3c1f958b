// ScopedPath: a file this process made for a while (a --jobs file written beside its final
// name, a private copy of a script for sbatch), removed when the owner goes out of scope unless
// Release()d. Errors of the removal are ignored: the file may already be gone. Not copyable.
#pragma once

#include <filesystem>
#include <string>
#include <system_error>
#include <utility>

namespace rightsize {

class ScopedPath {
 public:
  ScopedPath() = default;
  explicit ScopedPath(std::string path) : path_(std::move(path)) {}
  ScopedPath(const ScopedPath&) = delete;
  ScopedPath& operator=(const ScopedPath&) = delete;
  ~ScopedPath() noexcept {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove(path_, ec);
  }

  const std::string& path() const { return path_; }
  // Keeps the file (it was renamed into place, say).
  void Release() { path_.clear(); }

 private:
  std::string path_;
};

}  // namespace rightsize
