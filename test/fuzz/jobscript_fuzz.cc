// libFuzzer target for what `rightsize predict` and `submit` read from a batch script:
// ParseJobScript (jobscript/job_script.h: #SBATCH directives, the body's commands) with and
// without sbatch's own arguments, its main command, and GRES lists (ParseGresGpus, also read
// from sinfo). Seeds: corpus/jobscript/ (test/data/scripts).
#include "fuzz_util.h"
#include "jobscript/job_script.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto text = rightsize::fuzz::AsText(data, size);
  // Without sbatch's own arguments for inputs of even size, with them for odd (one parse per
  // input; a mutation that changes the size reads it the other way).
  std::vector<std::string> args;
  if (size % 2 == 1) args = {"--mem=8G", "-c", "4", "--gres=gpu:a100:2"};
  auto script = rightsize::ParseJobScript(text, args);
  if (script.ok()) {
    (void)script->MainCommand();
    for (const auto& w : script->warnings) (void)w.ToString().size();
    rightsize::JobRecord r;
    r.request = script->request;
    rightsize::fuzz::UseRecord(r);
  }
  // The first line as a GRES list (the --gres value and sinfo's %G column).
  auto first = text.substr(0, text.find('\n'));
  (void)rightsize::ParseGresGpus(first.substr(0, 4096));
  return 0;
}
