// ParseJobScript: what a SLURM batch script asks for and what it runs.
//
// Reads `#SBATCH` directives the way sbatch does: only lines that start with `#SBATCH` in
// column 1, only before the first command (later ones are ignored, with a warning), long and
// short forms, `=` or a space, unique prefixes of long names (`--part=gpu`), several options on
// one line, `#` starting a trailing comment. Options given to sbatch before the script
// (`command_line_args`) override the directives, as sbatch applies them after the script's.
// The totals in `request` follow SLURM's rules; the per-unit values stay as written beside them.
//
// The body (what follows the directives) is split into commands: `\` continuations joined,
// comments, assignments, `module load` and shell control words set aside, `;`, `&&`, `||`, `|`
// and `&` separating commands; each command's launcher (srun, mpirun, torchrun, …), container
// and program are recognised. Nothing is expanded or executed: `$VAR` stays as written.
//
// Failure: a file with NUL bytes, with neither a directive nor a command, or with neither a #!
// line nor a directive (plain text, which sbatch refuses) is BadInput. A
// malformed value, an unknown option or anything sbatch would refuse is a warning with its line
// number, and the rest of the script is still read. Pure functions; thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "core/job.h"
#include "core/status.h"

namespace rightsize {

// The GPUs in a GRES list as SLURM writes it (`--gres`, sinfo's %G): "gpu:a100:2(S:0-1),shard:1"
// is 2 GPUs of type a100; "none" and "(null)" are none. nullopt when a GPU item is malformed: a
// count that is negative or over a million (core/plausible.h), or a type not starting with a
// letter ("gpu:-1"). A job script warns about such an option, naming its line.
struct GresGpus {
  int count = 0;
  std::string type;  // "" untyped, "mixed" when several types
};
std::optional<GresGpus> ParseGresGpus(std::string_view text);

struct ScriptWarning {
  int line = 0;         // 1-based line in the script; 0 for the command-line arguments
  std::string message;  // "--mem: expected a size like 4G, got 'lots'"
  // "line 7: --mem: expected …" or "command line: --mem: expected …".
  std::string ToString() const;
};

struct JobScript {
  // The resources of one job (one array task: each task gets all of this). cpus, gpus and the
  // memory total are for the whole job; nodes is the minimum asked for (`-N 2-4` gives 2).
  // cpus is always set (SLURM's default is one task of one CPU) and gpus is 0 when no GPU is
  // asked for; time_limit_s is rounded up to whole minutes as SLURM does, and nullopt when
  // not given (the partition's default applies) or unlimited (time_unlimited).
  ResourceRequest request;

  // One directive as written, its name in the long form without dashes ("-c 4" gives
  // {"cpus-per-task", "4"}; a flag has an empty value), so `rightsize submit` can rewrite it.
  struct Directive {
    std::string name;
    std::string value;
    int line = 0;
  };
  std::vector<Directive> directives;  // in script order; command-line arguments are not here

  // The per-unit values in effect (after command-line overrides), as sbatch will see them.
  std::optional<int> ntasks, ntasks_per_node, cpus_per_task, cpus_per_gpu;
  std::optional<int64_t> mem_per_cpu_bytes, mem_per_gpu_bytes, mem_per_node_bytes;
  bool mem_whole_node = false;  // --mem=0: all the memory of each node, whatever that is
  std::optional<int> gpus_per_node, gpus_per_task;
  std::string array_spec;                // "1-10%2"
  int array_tasks = 0;                   // 10 for "1-10%2"; 0 when not an array job
  std::optional<int> array_max_running;  // 2 for "%2"
  std::string constraint;
  bool exclusive = false;
  std::string shebang;  // "/bin/bash -l" from "#!/bin/bash -l"; "" when missing

  // One command of the body: a line may hold several ("cd $DIR && srun ./app").
  struct Command {
    int line = 0;      // the first physical line
    std::string text;  // this command's text, continuations joined, trailing comment removed
    // The outermost parallel launcher: srun, mpirun, mpiexec, torchrun (also `python -m
    // torch.distributed.run`), accelerate, deepspeed, tune (torchtune's `tune run`, whose
    // program is a recipe), or the batch launchers ibrun, aprun, jsrun; else "python" when a
    // Python interpreter runs the program; else "".
    std::string launcher;
    // Every launcher, wrapper and interpreter peeled off, outermost first:
    // {"srun", "apptainer", "python"} for `srun apptainer exec img.sif python x.py`.
    std::vector<std::string> wrappers;
    std::string container_image;  // "img.sif" for apptainer/singularity exec and run
    // What runs, after the launchers' own options: "train.py", "-m pkg.mod", "-c" (inline
    // code, in args), "-" (stdin), "./a.out", "echo".
    std::string program;
    std::vector<std::string> args;  // quotes removed, redirections dropped
    // Shell builtins and small utilities (cd, echo, mkdir, date, nvidia-smi, …): not the work.
    bool housekeeping = false;
  };
  std::vector<Command> commands;
  std::vector<std::string> modules;        // `module load X/Y`, `ml X`, in order
  std::map<std::string, std::string> env;  // `export A=B`, `A=B`, `A=B cmd`; last one wins
  // FNV-1a 64 (16 hex digits) of the body without comments, blank lines, directives,
  // indentation or repeated spaces: equal for two scripts that run the same thing with other
  // resources. Stable across versions and platforms.
  std::string body_hash;
  std::vector<ScriptWarning> warnings;

  // The command that is most likely the job's work: the first one with a parallel launcher,
  // else the first run by Python, else the first that is not housekeeping; nullptr if none.
  const Command* MainCommand() const;
};

// "python", "python3", "python3.11": a name (without its folder) that runs a Python interpreter.
bool IsPythonInterpreter(std::string_view name);

// `command_line_args` are sbatch's own arguments before the script name, one per element
// ({"--mem=8G", "-c", "4"}).
StatusOr<JobScript> ParseJobScript(std::string_view text,
                                   const std::vector<std::string>& command_line_args = {});

// Reads the file (at most kMaxJobScriptBytes: SLURM's own default limit is 4 MiB) and parses
// it; NotFound or IoError when it cannot be read, BadInput messages start with the path.
constexpr int64_t kMaxJobScriptBytes = 16 * kMiB;
StatusOr<JobScript> ParseJobScriptFile(const std::string& path,
                                       const std::vector<std::string>& command_line_args = {});

}  // namespace rightsize
