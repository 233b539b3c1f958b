#include "slurm/sbatch.h"

#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>
#include <regex>

#include "core/fd.h"
#include "core/scoped_path.h"
#include "slurm/command.h"

namespace rightsize::slurm {

StatusOr<SbatchResult> RunSbatch(const SbatchRequest& request) {
  std::vector<std::string> argv = {request.sbatch};
  argv.insert(argv.end(), request.args.begin(), request.args.end());
  std::optional<ScopedPath> copy;  // the private copy of a rewritten script
  if (request.rewritten) {
    // sbatch reads the script when it submits, so a private copy can go right after.
    if (!request.job_name.empty()) argv.push_back("--job-name=" + request.job_name);
    char path[] = "/tmp/rightsize-submit-XXXXXX";
    UniqueFd fd(mkstemp(path));
    if (!fd) return Status::IoError(fmt::format("mkstemp: {}", std::strerror(errno)));
    copy.emplace(path);
    const std::string& text = *request.rewritten;
    if (write(fd.get(), text.data(), text.size()) != static_cast<ssize_t>(text.size())) {
      return Status::IoError(fmt::format("{}: cannot write", copy->path()));
    }
    fd.reset();
    argv.push_back(copy->path());
  } else {
    argv.push_back(request.script_path);
  }
  argv.insert(argv.end(), request.script_args.begin(), request.script_args.end());
  RS_ASSIGN_OR_RETURN(CommandResult run, RunCommand(argv));
  SbatchResult result;
  result.exit_code = run.exit_status;
  result.out = std::move(run.out);
  std::smatch m;
  static const std::regex kJobId(R"((\d+))");
  if (result.exit_code == 0 && std::regex_search(result.out, m, kJobId)) result.job_id = m[1].str();
  return result;
}

}  // namespace rightsize::slurm
