// Code facts for a diagnosis: the lines of the job's code and script that decide how much
// memory and time it needs (the batch size, the data-loader workers, the learning rate) and
// whether it already uses reduced precision or activation checkpointing, so a fix can say
// "batch_size=64 at train.py:42 → 32".
//
// The facts come from the code component's tree-sitter analysis (code/analysis.h): the job
// script's Python command when the script runs one, else the program in the code folder (the
// file given, the outermost frame of the job's own traceback, train.py or main.py, or the only
// Python file there). Nothing is executed. A folder that cannot be analysed gives no facts;
// it is never an error. Pure apart from reading files; thread-safe.
#pragma once

#include <optional>
#include <string>

#include "jobscript/job_script.h"

namespace rightsize {

// One fact a fix can name: the line it was written on, and the literal as written there.
struct CodeLine {
  std::string file;   // relative to the code folder, or the script's path for a script line
  int line = 0;       // 1-based
  std::string text;   // the line, trimmed
  std::string value;  // the literal on the line that holds the value: "64", "3e-4"
  double number = 0;  // its value
};

struct CodeFactsForDiagnosis {
  std::optional<CodeLine> batch_size, num_workers, learning_rate;
  bool reduced_precision = false;  // autocast, bf16/fp16 weights, 8/4-bit, or a dtype read
  bool checkpointing = false;      // activation checkpointing found
};

// `script` is the parsed job script at `script_path` (nullopt when none or unparsable);
// `code_dir` the job's source folder or one file ("" for the script's folder); `entry_hint` a
// file under the code folder that ran (the outermost frame of the job's own traceback), "" if
// none.
CodeFactsForDiagnosis ReadCodeFacts(const std::optional<JobScript>& script,
                                    const std::string& script_path, const std::string& code_dir,
                                    const std::string& entry_hint);

// The line `line` of `path`, trimmed; nullopt when unreadable.
std::optional<std::string> ReadSourceLine(const std::string& path, int line);

// The file under `dir` that a traceback path names ("/home/a/proj/train.py" → "dir/train.py"
// or "dir/proj/train.py"): the longest matching suffix; "" when none.
std::string FindSourceFile(const std::string& dir, const std::string& traceback_path);

}  // namespace rightsize
