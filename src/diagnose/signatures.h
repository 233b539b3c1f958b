// Failure signatures: the log lines that name why a job died, one table for every framework,
// scheduler and library version rightsize knows.
//
// A signature is a regular expression (RE2 syntax, matched against one line, Latin-1 so any
// byte sequence is valid input), the failure class it is evidence for, and how strongly: 0.97
// for a line that can only mean one thing ("DUE TO TIME LIMIT"), 0.4 for a symptom that many
// causes share ("Killed"). Named groups ("(?P<tried>…)") become the facts of the diagnosis.
// Separate fact patterns run only on lines a signature already matched, so the scan stays a
// single pass. The table is data: adding a wording is adding a row (see docs/diagnosis.md).
// Immutable after start-up; thread-safe.
#pragma once

#include <optional>
#include <span>
#include <string_view>

namespace rightsize {

// The root cause of a failed job (the `class` of rightsize.diagnosis/v1).
enum class FailureClass {
  kGpuOom,
  kHostOom,
  kTimeout,
  kNodeFailure,
  kPreemption,
  kNcclTimeout,
  kNcclError,
  kGpuHardware,
  kIllegalMemoryAccess,
  kSegfault,
  kMpiAbort,
  kDiskFull,
  kMissingFile,
  kImportError,
  kDriverMismatch,
  kDataloaderKilled,
  kNanDivergence,
  kUnknown,
};
inline constexpr int kFailureClassCount = static_cast<int>(FailureClass::kUnknown) + 1;

// "gpu_oom", "host_oom", …, "unknown".
std::string_view FailureClassName(FailureClass c);
std::optional<FailureClass> FailureClassFromName(std::string_view name);

// What a signature's match means beyond its class.
enum class SignatureKind {
  kCause,      // evidence for `cls`
  kSymptom,    // evidence for `cls` only when nothing stronger explains it (exit 137, "Killed")
  kXid,        // an NVIDIA Xid line: the class comes from the Xid catalogue (named group "xid")
  kTraceback,  // "Traceback (most recent call last):" starts a Python traceback
  kFrame,      // a traceback frame: groups "file", "line", "func"
  kException,  // the last line of a traceback: groups "exception", "message"
  kCudaError,  // a numbered CUDA error ("cuda runtime error (2)", "(35 vs. 0)", "code=700"): the
               // class comes from the code (CudaErrorByCode)
};

struct Signature {
  std::string_view id;  // stable, used in evidence and tests: "pytorch_cuda_oom"
  FailureClass cls;
  SignatureKind kind;
  double strength;           // 0..1: how sure this line alone makes us
  std::string_view pattern;  // RE2, one line, case-sensitive unless it says (?i)
  std::string_view facts;    // optional RE2 with named groups, run on the matched line
  // A line printed at warning level counts half (it did not end the job), except for wordings
  // that are announced as warnings and are the cause all the same: a preemption notice, the
  // driver that PyTorch finds too old at CUDA initialisation, TensorFlow's failed op.
  bool decisive_as_warning = false;
};

std::span<const Signature> AllSignatures();

// What a numbered CUDA error means: cudaError_t as in driver_types.h (the CUDA 10.1+ numbers
// and, where they differ and do not collide, the CUDA <= 10.0 ones: 77 = illegal address,
// 59 = assert, 39 = ECC, 48 = no kernel image) and CUresult of the driver API, which shares
// them. Codes that say nothing about the cause (30/999 unknown, 1 invalid value) are absent.
struct CudaErrorInfo {
  int code;
  std::string_view name;  // "cudaErrorMemoryAllocation"
  FailureClass cls;
  double strength;
  // A code that follows many causes (999, unknown): a symptom, named only when nothing else is.
  bool symptom = false;
};
const CudaErrorInfo* CudaErrorByCode(int code);

// Whether a root cause of class `cause` commonly produces the errors of class `effect` (an
// OOM-killed rank makes the others time out in NCCL and mpirun abort), so `effect` is
// reported as a consequence rather than the cause.
bool Explains(FailureClass cause, FailureClass effect);

}  // namespace rightsize
