#include "core/status.h"

namespace rightsize {

namespace {
const char* CodeName(Status::Code code) {
  switch (code) {
    case Status::Code::kOk:
      return "ok";
    case Status::Code::kInvalidArgument:
      return "invalid argument";
    case Status::Code::kBadInput:
      return "bad input";
    case Status::Code::kNotFound:
      return "not found";
    case Status::Code::kIoError:
      return "I/O error";
    case Status::Code::kInternal:
      return "internal error";
  }
  return "unknown";
}
}  // namespace

std::string Status::ToString() const {
  if (ok()) return "ok";
  return std::string(CodeName(code_)) + ": " + message_;
}

Status Status::WithContext(const std::string& context) const {
  if (ok()) return *this;
  return Status(code_, context + ": " + message_);
}

}  // namespace rightsize
