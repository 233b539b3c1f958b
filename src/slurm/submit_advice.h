// Submit advice: the #SBATCH changes a rightsize.predict/v1 document suggests for a job script
// and the sbatch options it is submitted with, made where each value is set.
//
// A suggested request (memory, CPUs, time) becomes a change when it differs from the request by
// at least kMinChange. An sbatch option given on the command line is replaced there, a
// directive is rewritten on its line (the rest of the line kept), and a missing one is added
// after the last #SBATCH line (else after the shebang, else first). The script text given is
// never written anywhere: the new text is returned. Pure functions; thread-safe.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jobscript/job_script.h"

namespace rightsize::slurm {

inline constexpr double kMinChange = 0.1;  // smaller differences are noise, not advice

// One suggested change of an sbatch option.
struct Change {
  std::string option;  // long name without dashes: "mem", "time", "cpus-per-task"
  std::string from;    // as written ("" when the option was not set)
  std::string to;
  std::string where;  // "script", "command line", "added"
  int line = 0;       // 1-based script line ("added": the new line's number); 0 = command line
  std::string why;
};

struct SubmitAdvice {
  std::vector<Change> changes;
  std::vector<std::string> args;  // the sbatch options with their changes made
  std::string script;             // the script's text with its changes made
  bool script_changed = false;
  std::string diff;  // unified diff of the script to `script`; "" when unchanged
};

// Everything at once: `prediction` is a rightsize.predict/v1 document, `script` the parse of
// `script_text` with `sbatch_args`; `script_name` heads the diff.
SubmitAdvice AdviseSubmit(const nlohmann::json& prediction, const JobScript& script,
                          const std::vector<std::string>& sbatch_args,
                          const std::string& script_text, const std::string& script_name);

// The pieces of AdviseSubmit.
// The changes the prediction suggests for this script (where: "script" or "added").
std::vector<Change> SuggestChanges(const nlohmann::json& prediction, const JobScript& script);
// Rewrites the sbatch options given on the command line ("--mem=8G", "--mem 8G", "-t 60") for
// the changes of options found there; marks those changes "command line".
std::vector<std::string> ApplyToArgs(std::vector<std::string> args, std::vector<Change>* changes);
// The script with the "script" and "added" changes made; `diff` gets the unified diff.
std::string ApplyToScript(const std::string& text, std::vector<Change>* changes,
                          const std::string& name, std::string* diff);

// A unified diff of two versions whose lines only differ by replacements and insertions:
// `origin[i]` is the old line new line i came from, -1 for an inserted line; `replaced[j]` says
// old line j was rewritten.
std::string UnifiedDiff(const std::string& name, const std::vector<std::string>& old_lines,
                        const std::vector<std::string>& new_lines, const std::vector<int>& origin,
                        const std::vector<bool>& replaced);

// The changes as the rightsize.submit/v1 document lists them.
nlohmann::json ChangesJson(const std::vector<Change>& changes);
// The changes as `submit` prints them: each with where and why, the diff, the new sbatch options
// (`sbatch_args` are the ones given), and how to apply them unless `applied`. With none, the
// `prediction` (when given) says at which risk some would be ("suggested_at_risk").
std::string SubmitAdviceText(const SubmitAdvice& advice,
                             const std::vector<std::string>& sbatch_args, bool applied,
                             const nlohmann::json* prediction = nullptr);

}  // namespace rightsize::slurm
