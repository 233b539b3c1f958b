// The GPU memory a job's Python code needs, read from the code itself (code/): the prediction
// for a program the cluster has never run, and the figure shown beside the history's.
//
// Pure functions of the files they read; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "code/advice.h"
#include "code/analysis.h"
#include "code/memory_model.h"
#include "jobscript/job_script.h"
#include "store/store.h"

namespace rightsize {

// The folder `advise` and `predict` read a job's code from by default: the script's own.
std::string DefaultCodeDir(const std::string& script_path);

// The code a job runs as it is stored with the job (store/'s job_code; cluster, job id and time
// left for the caller): the entry program, the facts read (FactsJson), the GPU memory estimate's
// document ("" when there is none) and a hash (FNV-1a 64, hex) of the files the analysis read,
// so an edit of the code shows even where the facts stay the same. NotFound when the script runs
// no Python program the analysis finds; the analysis's errors.
// `env`: the environment the job runs in, where the caller can read it (code::JobEnvironment).
StatusOr<StoredJobCode> ReadJobCode(const JobScript& script, const std::string& script_path,
                                    const std::string& code_dir,
                                    const code::JobEnvironment& env = {});

// Both readings of a job's code from one analysis (what `predict` needs): the GPU memory the
// code needs, p10/p50/p90 per job (bytes), "per_gpu" (the estimate's document), "gpus", "lines"
// (file:line of the terms) and "text" (the lines `predict` prints), nullopt when the code cannot
// be read or sized; and the stored form of ReadJobCode (its errors as there). `code_dir` "" =
// the script's folder.
struct JobCodeReading {
  std::optional<nlohmann::json> gpu_memory;
  StatusOr<StoredJobCode> stored = Status::NotFound("not read");
};
JobCodeReading ReadCode(const JobScript& script, const std::string& script_path,
                        const std::string& code_dir, const code::JobEnvironment& env = {});

// What `advise` says of a job script's code: the facts read, the GPU memory estimate (or why
// there is none), the GPU it is fitted on and line-level advice.
struct CodeAdvice {
  std::string code_dir;
  code::GpuSpec gpu;
  std::string gpu_from;  // "--gpu", "the script's --gres", "default" (and why)
  code::CodeFacts facts;
  StatusOr<code::MemoryEstimate> estimate = Status::NotFound("not estimated");
  std::vector<code::Advice> advice;
};

// Reads the code of `script` (from `script_path`'s folder, or `code_dir`) and fits it on `gpu`
// (a name from code::KnownGpus(); "" = the script's --gres type, else the default).
// InvalidArgument for an unknown `gpu`; the analysis's errors.
StatusOr<CodeAdvice> AdviseJobCode(const JobScript& script, const std::string& script_path,
                                   const std::string& code_dir, const std::string& gpu,
                                   const code::JobEnvironment& env = {});

// The rightsize.advise/v1 document (`advise --json`, the MCP server's advise tool) of `advice`
// for the script named `script`.
nlohmann::json AdviseJson(const CodeAdvice& advice, const std::string& script);

}  // namespace rightsize
