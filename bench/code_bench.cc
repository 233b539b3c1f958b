// Reading a job's code: a generated 5,000-line Python project (an entry file, 20 local modules
// of 250 lines each, argparse, a YAML config), analysed end to end. Target: < 100 ms.
#include <benchmark/benchmark.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "code/analysis.h"
#include "code/memory_model.h"
#include "jobscript/job_script.h"

namespace {

namespace fs = std::filesystem;

std::string MakeProject() {
  fs::path dir = fs::temp_directory_path() / "rightsize_code_bench";
  fs::create_directories(dir);
  std::ofstream(dir / "config.yaml") << "train:\n  batch_size: 8\n  block_size: 1024\n";
  std::ofstream entry(dir / "train.py");
  entry << "import argparse\nimport torch\nfrom transformers import AutoModelForCausalLM\n";
  for (int m = 0; m < 20; ++m) entry << "from mod" << m << " import helper" << m << "\n";
  entry << "parser = argparse.ArgumentParser()\n"
           "parser.add_argument('--config', default='config.yaml')\n"
           "parser.add_argument('--lr', type=float, default=1e-4)\n"
           "args = parser.parse_args()\n"
           "model = AutoModelForCausalLM.from_pretrained('gpt2-large')\n"
           "loader = torch.utils.data.DataLoader(ds, batch_size=cfg['train']['batch_size'])\n"
           "opt = torch.optim.AdamW(model.parameters(), lr=args.lr)\n";
  for (int m = 0; m < 20; ++m) {
    std::ofstream mod(dir / ("mod" + std::to_string(m) + ".py"));
    mod << "import torch\nfrom torch import nn\n\n";
    for (int f = 0; f < 31; ++f) {
      mod << "def helper"
          << (f == 0 ? std::to_string(m) : std::to_string(m) + "_" + std::to_string(f))
          << "(x, scale=" << f << "):\n"
          << "    y = torch.matmul(x, x.t()) * scale\n"
          << "    for i in range(10):\n"
          << "        y = y + nn.functional.relu(y) / (i + 1)\n"
          << "    z = {'a': 1, 'b': [1, 2, 3], 'c': \"text\"}\n"
          << "    w = [v * 2 for v in z['b'] if v > 1]\n"
          << "    return y.sum() + len(w)\n\n";
    }
  }
  std::ofstream(dir / "job.sh") << "#!/bin/bash\n#SBATCH --gres=gpu:a100:1\n"
                                   "python train.py --config config.yaml\n";
  return dir.string();
}

void BM_AnalyzeProject(benchmark::State& state) {
  std::string dir = MakeProject();
  auto script = rightsize::ParseJobScriptFile(dir + "/job.sh");
  if (!script.ok()) {
    state.SkipWithError("job script");
    return;
  }
  int64_t lines = 0;
  std::vector<std::string> files;
  for (auto _ : state) {
    auto facts = rightsize::code::AnalyzeJobCode(*script, dir, "job.sh");
    if (!facts.ok()) {
      state.SkipWithError("analysis failed");
      return;
    }
    auto e = rightsize::code::EstimateGpuMemory(*facts);
    benchmark::DoNotOptimize(e);
    files = facts->files;
  }
  for (const auto& f : files) {  // outside the timed loop
    std::ifstream in(fs::path(dir) / f);
    lines += std::count(std::istreambuf_iterator<char>(in), {}, '\n');
  }
  state.counters["lines"] = static_cast<double>(lines);
}
BENCHMARK(BM_AnalyzeProject)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
