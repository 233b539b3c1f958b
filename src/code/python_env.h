// The Python environment a job will run in, read from the files its interpreter would import,
// never by running a Python: which torch the job imports decides what its attention keeps
// (torch before 2.0 has no scaled_dot_product_attention, and nn.MultiheadAttention, the
// Transformer layers and programs written with a fallback keep the s² attention scores).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "jobscript/job_script.h"

namespace rightsize::code {

// Where a batch job's commands will run, as far as the machine reading the job can tell. SLURM's
// default (--export=ALL) gives a batch job the environment of the shell that submitted it, so a
// command run by the job's user at submission (advise, predict, submit) sees the job's PATH; a
// server or a submit plugin reading other users' jobs does not, and leaves this empty.
struct JobEnvironment {
  std::string path;        // PATH the job's commands are found in; "" = not known
  std::string home;        // the user's home folder (Python's user site-packages)
  std::string pythonpath;  // PYTHONPATH, searched before the site folders
  // The interpreter the job runs, where the caller names it (`advise --python`); "none": do not
  // read the job's Python environment at all.
  std::string python;

  // This process's PATH, HOME and PYTHONPATH.
  static JobEnvironment OfThisProcess();
  bool Readable() const { return python != "none" && (!path.empty() || !python.empty()); }
};

// The torch a job's interpreter imports.
struct TorchInstall {
  std::string version;      // "1.13.0a0", "2.4.1+cu121"
  std::string file;         // the version.py read
  int line = 0;             // its __version__ line
  std::string interpreter;  // the Python that imports it, as found ("/opt/venv/bin/python")
  std::string found_as;     // "python on PATH", "the virtualenv activated at job.sh:4", "--python"
};

// Whether a release `version` is at least major.minor.patch ("2.1.0+cu121" is at least 2.1.0;
// "1.13.0a0" is not 1.13.1); nullopt when it does not start with a number.
std::optional<bool> VersionAtLeast(std::string_view version, int major, int minor, int patch);

// The torch that `cmd` (a command of `script` that runs Python) imports, found from the
// interpreter the command names, the virtualenv the script activates before it, `env`'s PATH,
// PYTHONPATH and user site-packages, and the interpreter's own site folders (virtualenv,
// Debian's dist-packages, conda and python.org layouts). nullopt, with the reason in `why`,
// where the script changes its environment in a way not followed here (`module load`, conda,
// a container, PATH set in the script), the interpreter is not found, or it has no torch.
std::optional<TorchInstall> FindTorch(const JobScript& script, const JobScript::Command& cmd,
                                      const std::string& code_dir, const JobEnvironment& env,
                                      std::string* why);

}  // namespace rightsize::code
