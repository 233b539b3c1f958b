#include "cli/terminal.h"

#include <fmt/format.h>
#include <signal.h>
#include <unistd.h>

#include <algorithm>

namespace rightsize::cli {

namespace {
std::atomic<bool> g_stop{false};
// Only sets the flag: nothing else is async-signal-safe.
void OnStopSignal(int /*sig*/) { g_stop = true; }
}  // namespace

std::atomic<bool>& StopFlag() { return g_stop; }

void CatchStopSignals() {
  struct sigaction sa {};
  sa.sa_handler = OnStopSignal;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int ExitCodeFor(const Status& status) {
  switch (status.code()) {
    case Status::Code::kOk:
      return kExitOk;
    case Status::Code::kInvalidArgument:
      return kExitUsage;
    case Status::Code::kBadInput:
    case Status::Code::kNotFound:
    case Status::Code::kIoError:
      return kExitBadInput;
    case Status::Code::kInternal:
      return kExitInternal;
  }
  return kExitInternal;
}

int Fail(const Status& status) {
  fmt::print(stderr, "rightsize: {}\n", status.message());
  return ExitCodeFor(status);
}

ProgressBar::ProgressBar(std::string label)
    : label_(std::move(label)), enabled_(isatty(STDERR_FILENO) == 1) {}

ProgressBar::~ProgressBar() { Done(); }

void ProgressBar::Update(int64_t done, int64_t total) {
  if (!enabled_) return;
  if (total <= 0) {
    fmt::print(stderr, "\r{} {:.1f} MB", label_, static_cast<double>(done) / 1e6);
    drawn_ = true;
    return;
  }
  int permille = static_cast<int>(std::min<int64_t>(1000, done * 1000 / total));
  if (permille == last_permille_) return;
  last_permille_ = permille;
  int filled = permille * 30 / 1000;
  fmt::print(stderr, "\r{} [{}{}] {:3d}%", label_, std::string(static_cast<size_t>(filled), '#'),
             std::string(static_cast<size_t>(30 - filled), '.'), permille / 10);
  drawn_ = true;
}

void ProgressBar::Done() {
  if (enabled_ && drawn_) fmt::print(stderr, "\r\033[K");
  drawn_ = false;
}

}  // namespace rightsize::cli
