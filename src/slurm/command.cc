#include "slurm/command.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "core/fd.h"

extern char** environ;

namespace rightsize::slurm {

namespace {

// posix_spawn's list of what the child does to its descriptors before it runs the program.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&actions_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  ~FileActions() noexcept { posix_spawn_file_actions_destroy(&actions_); }
  posix_spawn_file_actions_t* get() { return &actions_; }

 private:
  posix_spawn_file_actions_t actions_;
};

StatusOr<int> Wait(pid_t pid, const std::string& program) {
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno == EINTR) continue;
    return Status::IoError(fmt::format("waiting for {}: {}", program, std::strerror(errno)));
  }
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return WEXITSTATUS(status);
}

}  // namespace

StatusOr<CommandResult> RunCommand(const std::vector<std::string>& argv,
                                   const std::string& stdout_path) {
  if (argv.empty()) return Status::InvalidArgument("RunCommand: no program given");
  FileActions actions;
  Pipe pipe;
  UniqueFd& read_end = pipe.read;
  UniqueFd& write_end = pipe.write;
  bool capture = stdout_path.empty();
  if (capture) {
    pipe = MakePipe(O_CLOEXEC);
    if (!read_end) return Status::IoError(fmt::format("pipe: {}", std::strerror(errno)));
    // dup2 clears close-on-exec on the child's stdout; the pipe's own ends close at exec.
    posix_spawn_file_actions_adddup2(actions.get(), write_end.get(), STDOUT_FILENO);
  } else {
    posix_spawn_file_actions_addopen(actions.get(), STDOUT_FILENO, stdout_path.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0600);
  }
  std::vector<char*> args;
  args.reserve(argv.size() + 1);
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  pid_t pid = 0;
  int rc = posix_spawnp(&pid, args[0], actions.get(), nullptr, args.data(), environ);
  // Ours goes now: the read below ends when the child's copy closes.
  write_end.reset();
  if (rc != 0) {
    return Status::IoError(fmt::format("cannot run {}: {}", argv[0], std::strerror(rc)));
  }
  CommandResult result;
  if (capture) {
    char buf[4096];
    for (;;) {
      ssize_t n = read(read_end.get(), buf, sizeof buf);
      if (n > 0) {
        result.out.append(buf, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {
        break;
      }
    }
    read_end.reset();
  }
  RS_ASSIGN_OR_RETURN(result.exit_status, Wait(pid, argv[0]));
  return result;
}

}  // namespace rightsize::slurm
