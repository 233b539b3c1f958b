// Status and StatusOr<T>: how every component reports an expected failure.
//
// A Status is either OK or carries a code and a human-readable message that names what went
// wrong and where (file, line, field). Functions that can fail on external input return one
// (marked [[nodiscard]]); exceptions from third-party libraries are caught at the wrapper and
// turned into a Status. Status and StatusOr are values: cheap to move, safe to copy, not
// thread-safe to mutate concurrently (like any value).
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace rightsize {

class [[nodiscard]] Status {
 public:
  // The codes map onto the CLI's exit codes (see ExitCodeFor in cli/).
  enum class Code {
    kOk = 0,
    kInvalidArgument,  // the caller asked for something impossible (a usage error)
    kBadInput,         // a file or record the user gave us is malformed
    kNotFound,
    kIoError,   // the OS or a database refused (disk, permissions, connection)
    kInternal,  // a broken invariant: a bug in rightsize
  };

  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string msg) {
    return {Code::kInvalidArgument, std::move(msg)};
  }
  static Status BadInput(std::string msg) { return {Code::kBadInput, std::move(msg)}; }
  static Status NotFound(std::string msg) { return {Code::kNotFound, std::move(msg)}; }
  static Status IoError(std::string msg) { return {Code::kIoError, std::move(msg)}; }
  static Status Internal(std::string msg) { return {Code::kInternal, std::move(msg)}; }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  const std::string& message() const { return message_; }
  // "bad input: FILE:3: field MaxRSS: expected …" — for logs and the CLI.
  std::string ToString() const;
  // The same status with `context` prepended to the message ("context: message").
  Status WithContext(const std::string& context) const;

 private:
  Status(Code code, std::string msg) : code_(code), message_(std::move(msg)) {}
  Code code_ = Code::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] StatusOr {
 public:
  StatusOr(T value) : v_(std::move(value)) {}        // NOLINT(google-explicit-constructor)
  StatusOr(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).ok() && "StatusOr built from an OK status has no value");
  }

  bool ok() const { return std::holds_alternative<T>(v_); }
  Status status() const { return ok() ? Status::Ok() : std::get<Status>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T& value() & { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  const T& operator*() const& { return value(); }
  T& operator*() & { return value(); }
  const T* operator->() const { return &value(); }
  T* operator->() { return &value(); }

 private:
  std::variant<Status, T> v_;
};

}  // namespace rightsize

// Returns from the enclosing function when `expr` (a Status) is not OK.
#define RS_RETURN_IF_ERROR(expr)             \
  do {                                       \
    ::rightsize::Status rs_status_ = (expr); \
    if (!rs_status_.ok()) return rs_status_; \
  } while (false)

#define RS_CONCAT_INNER(a, b) a##b
#define RS_CONCAT(a, b) RS_CONCAT_INNER(a, b)
// RS_ASSIGN_OR_RETURN(auto x, MaybeX()); assigns the value or returns the error.
#define RS_ASSIGN_OR_RETURN(lhs, expr) \
  RS_ASSIGN_OR_RETURN_IMPL(RS_CONCAT(rs_or_, __LINE__), lhs, expr)
// `lhs` is a declaration ("auto x") and `tmp` a name, so neither can be parenthesised.
// NOLINTBEGIN(bugprone-macro-parentheses)
#define RS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.ok()) return tmp.status();            \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
