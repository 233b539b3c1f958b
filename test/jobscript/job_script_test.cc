#include "jobscript/job_script.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>
#include <vector>

namespace rightsize {
namespace {

std::string ScriptPath(const std::string& name) {
  return std::string(RIGHTSIZE_TEST_DATA_DIR) + "/data/scripts/" + name;
}

JobScript Parse(const std::string& name, const std::vector<std::string>& args = {}) {
  auto s = ParseJobScriptFile(ScriptPath(name), args);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : JobScript();
}

JobScript ParseString(const std::string& text, const std::vector<std::string>& args = {}) {
  auto s = ParseJobScript(text, args);
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  return s.ok() ? *s : JobScript();
}

std::vector<std::string> Warnings(const JobScript& s) {
  std::vector<std::string> out;
  for (const auto& w : s.warnings) out.push_back(w.ToString());
  return out;
}

// True when some warning starts with `prefix` ("line 7: --mem").
bool HasWarning(const JobScript& s, const std::string& prefix) {
  auto ws = Warnings(s);
  return std::any_of(ws.begin(), ws.end(),
                     [&](const std::string& w) { return w.rfind(prefix, 0) == 0; });
}

const JobScript::Directive* FindDirective(const JobScript& s, const std::string& name) {
  for (const auto& d : s.directives) {
    if (d.name == name) return &d;
  }
  return nullptr;
}

TEST(JobScriptTest, PyTorchDdpJobTotalsAndLaunch) {
  JobScript s = Parse("pytorch_ddp.sh");
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  const ResourceRequest& r = s.request;
  EXPECT_EQ(r.job_name, "resnet50-ddp");
  EXPECT_EQ(r.partition, "gpu");
  EXPECT_EQ(r.account, "vision");
  EXPECT_EQ(*r.nodes, 2);
  EXPECT_DOUBLE_EQ(*r.cpus, 2 * 4 * 8);  // nodes × tasks per node × cpus per task
  EXPECT_EQ(*r.gpus, 8);                 // gpu:a100:4 is per node
  EXPECT_EQ(r.gpu_type, "a100");
  EXPECT_EQ(*r.memory_bytes, 2 * 480 * kGiB);  // --mem is per node
  EXPECT_EQ(*r.memory_per_unit_bytes, 480 * kGiB);
  EXPECT_EQ(r.memory_scope, MemoryScope::kPerNode);
  EXPECT_EQ(*r.time_limit_s, 86400);
  EXPECT_EQ(*s.gpus_per_node, 4);
  EXPECT_EQ(s.shebang, "/bin/bash");

  EXPECT_EQ(s.modules, (std::vector<std::string>{"cuda/12.1", "nccl/2.18"}));
  EXPECT_EQ(s.env.at("MASTER_PORT"), "29500");
  EXPECT_EQ(s.env.at("OMP_NUM_THREADS"), "8");

  const JobScript::Command* main = s.MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->line, 24);  // the first line of the continued command
  EXPECT_EQ(main->launcher, "srun");
  EXPECT_EQ(main->wrappers, (std::vector<std::string>{"srun", "torchrun"}));
  EXPECT_EQ(main->program, "train.py");
  EXPECT_EQ(main->args, (std::vector<std::string>{"--arch", "resnet50", "--batch-size", "256",
                                                  "--epochs", "90"}));
  EXPECT_EQ(main->text.find("# full run"), std::string::npos);

  // Directives keep their order, lines and long names for `rightsize submit`.
  ASSERT_EQ(s.directives.size(), 12u);
  EXPECT_EQ(s.directives[0].name, "job-name");
  EXPECT_EQ(s.directives[0].line, 2);
  const auto* mem = FindDirective(s, "mem");
  ASSERT_NE(mem, nullptr);
  EXPECT_EQ(mem->value, "480G");
  EXPECT_EQ(mem->line, 9);
}

TEST(JobScriptTest, TorchtuneRunIsALauncherWhoseProgramIsTheRecipe) {
  auto s = ParseJobScript(
      "#!/bin/bash\n"
      "srun tune run --nnodes 1 --rdzv_backend c10d --nproc_per_node 4 "
      "lora_finetune_distributed --config my.yaml batch_size=8\n");
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  const JobScript::Command* main = s->MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->launcher, "srun");
  EXPECT_EQ(main->wrappers, (std::vector<std::string>{"srun", "tune"}));
  EXPECT_EQ(main->program, "lora_finetune_distributed");  // torchrun's options and values taken off
  EXPECT_EQ(main->args, (std::vector<std::string>{"--config", "my.yaml", "batch_size=8"}));
}

TEST(JobScriptTest, MpiJobWithShortOptionsAndMemPerCpu) {
  JobScript s = Parse("mpi_job.sh");
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  EXPECT_EQ(s.request.job_name, "lammps-melt");
  EXPECT_EQ(*s.request.nodes, 4);
  EXPECT_DOUBLE_EQ(*s.request.cpus, 128);
  EXPECT_EQ(*s.request.time_limit_s, 12 * 3600);
  EXPECT_EQ(s.request.partition, "compute");
  EXPECT_EQ(s.request.account, "chem123");
  // No unit means MiB; the total is per CPU × CPUs.
  EXPECT_EQ(*s.mem_per_cpu_bytes, 2000 * kMiB);
  EXPECT_EQ(*s.request.memory_bytes, 128 * 2000 * kMiB);
  EXPECT_EQ(s.request.memory_scope, MemoryScope::kPerCpu);
  EXPECT_EQ(*s.request.gpus, 0);
  EXPECT_EQ(s.shebang, "/bin/bash -l");
  EXPECT_EQ(s.modules, (std::vector<std::string>{"gcc/12.2", "openmpi/4.1.5", "lammps/2023"}));
  EXPECT_EQ(FindDirective(s, "nodes")->value, "4");  // "-N 4" normalised

  const JobScript::Command* main = s.MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->launcher, "mpirun");
  EXPECT_EQ(main->program, "lmp");
  EXPECT_EQ(main->args, (std::vector<std::string>{"-in", "in.melt"}));  // redirections dropped
  ASSERT_EQ(s.commands.size(), 2u);
  EXPECT_TRUE(s.commands[0].housekeeping);  // cd
}

TEST(JobScriptTest, ArrayJobCountsTasksAndMinutes) {
  JobScript s = Parse("array_job.sh");
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  EXPECT_EQ(s.array_spec, "1-10%2");
  EXPECT_EQ(s.array_tasks, 10);
  EXPECT_EQ(*s.array_max_running, 2);
  EXPECT_EQ(*s.request.time_limit_s, 90 * 60);  // a bare number is minutes
  EXPECT_DOUBLE_EQ(*s.request.cpus, 4);
  EXPECT_EQ(*s.request.memory_bytes, 16 * kGiB);  // "--mem 16G" with a space
  EXPECT_EQ(s.env.at("PARAMS"), "params.txt");
  const JobScript::Command* main = s.MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->launcher, "python");
  EXPECT_EQ(main->program, "sweep.py");
  EXPECT_EQ(main->args,
            (std::vector<std::string>{"--config", "$LINE", "--seed", "$SLURM_ARRAY_TASK_ID"}));
}

TEST(JobScriptTest, GpuJobWithGresTypeAndAccelerate) {
  JobScript s = Parse("gpu_a100.sh");
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  EXPECT_EQ(*s.request.gpus, 4);
  EXPECT_EQ(s.request.gpu_type, "a100");
  EXPECT_DOUBLE_EQ(*s.request.cpus, 32);
  EXPECT_EQ(*s.request.memory_bytes, 256 * kGiB);
  EXPECT_EQ(*s.request.time_limit_s, 2 * 86400);  // days-hours:minutes
  EXPECT_EQ(s.constraint, "a100_80gb");
  EXPECT_TRUE(s.exclusive);
  EXPECT_EQ(s.request.qos, "high");
  const JobScript::Command* main = s.MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->launcher, "accelerate");
  EXPECT_EQ(main->program, "finetune.py");
  EXPECT_EQ(main->args, (std::vector<std::string>{"--model", "llama-7b", "--lr", "2e-5"}));
}

TEST(JobScriptTest, OldStyleMemPerCpuWithNtasks) {
  JobScript s = Parse("old_style.sh");
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  EXPECT_DOUBLE_EQ(*s.request.cpus, 16);
  EXPECT_EQ(*s.request.memory_bytes, 16 * 3 * kGiB);
  EXPECT_EQ(*s.request.memory_per_unit_bytes, 3 * kGiB);
  EXPECT_EQ(*s.request.time_limit_s, 48 * 3600);
  // Sixteen tasks may be spread over several nodes: SLURM decides, so nodes stays unknown.
  EXPECT_FALSE(s.request.nodes.has_value());
  const JobScript::Command* main = s.MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->launcher, "srun");
  EXPECT_EQ(main->program, "./model.exe");
}

TEST(JobScriptTest, DirectivesAfterTheFirstCommandAreIgnoredWithAWarning) {
  JobScript s = Parse("late_directive.sh");
  EXPECT_EQ(*s.request.memory_bytes, 4 * kGiB);
  EXPECT_DOUBLE_EQ(*s.request.cpus, 1);
  EXPECT_EQ(s.directives.size(), 2u);
  EXPECT_TRUE(HasWarning(s, "line 6: #SBATCH after the first command (line 5) is ignored"))
      << ::testing::PrintToString(Warnings(s));
  EXPECT_TRUE(HasWarning(s, "line 7: #SBATCH after the first command"));
  EXPECT_EQ(s.MainCommand()->program, "analyse.py");
}

TEST(JobScriptTest, CrlfScriptIsReadButFlagged) {
  JobScript s = Parse("crlf.sh");
  EXPECT_EQ(s.request.job_name, "crlf");  // no stray '\r'
  EXPECT_DOUBLE_EQ(*s.request.cpus, 2);
  EXPECT_EQ(*s.request.memory_bytes, 8 * kGiB);
  EXPECT_EQ(s.MainCommand()->args, (std::vector<std::string>{"--tol", "1e-6"}));
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0].line, 1);
  EXPECT_NE(s.warnings[0].message.find("dos2unix"), std::string::npos);
  // Same program as the same script with Unix line breaks.
  auto unix_text = ParseString(
      "#!/bin/bash\n#SBATCH --job-name=crlf\n#SBATCH --ntasks=2\n\nsrun ./solver --tol 1e-6\n");
  EXPECT_EQ(s.body_hash, unix_text.body_hash);
}

TEST(JobScriptTest, MalformedValuesAreWarningsWithLineNumbers) {
  JobScript s = Parse("bad_values.sh");
  EXPECT_TRUE(HasWarning(s,
                         "line 3: --cpus-per-task: expected a positive whole number, got "
                         "'four'"))
      << ::testing::PrintToString(Warnings(s));
  EXPECT_TRUE(HasWarning(s, "line 4: --time: expected a time"));
  EXPECT_TRUE(HasWarning(s, "line 5: --gpus: expected a GPU count"));
  EXPECT_TRUE(HasWarning(s, "line 6: unknown option --frobnicate"));
  EXPECT_TRUE(HasWarning(s,
                         "line 7: 'mem=8G' is not an option (sbatch refuses it); did you "
                         "mean --mem=8G?"));
  EXPECT_TRUE(HasWarning(s, "line 8: --mem: expected a size like 4G"));
  EXPECT_EQ(s.warnings.size(), 6u);
  // The rest is still read.
  EXPECT_EQ(s.request.job_name, "typos");
  EXPECT_DOUBLE_EQ(*s.request.cpus, 2);
  EXPECT_FALSE(s.request.memory_bytes.has_value());
  EXPECT_FALSE(s.request.time_limit_s.has_value());
  EXPECT_EQ(*s.request.gpus, 0);
  EXPECT_EQ(s.MainCommand()->program, "./app");
}

TEST(JobScriptTest, DeepspeedMemPerGpuAndContainers) {
  JobScript s = Parse("deepspeed_apptainer.sh");
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  EXPECT_EQ(*s.request.gpus, 8);
  EXPECT_EQ(s.request.gpu_type, "h100");
  EXPECT_DOUBLE_EQ(*s.request.cpus, 8 * 12);  // --cpus-per-gpu
  EXPECT_EQ(*s.request.memory_bytes, 8 * 80 * kGiB);
  EXPECT_EQ(s.request.memory_scope, MemoryScope::kPerGpu);
  EXPECT_EQ(*s.request.time_limit_s, 4 * 3600);
  EXPECT_EQ(s.env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(s.env.at("HF_HOME"), "/scratch/hf");
  ASSERT_EQ(s.commands.size(), 2u);
  EXPECT_EQ(s.commands[0].launcher, "deepspeed");
  EXPECT_EQ(s.commands[0].program, "pretrain.py");
  EXPECT_EQ(s.commands[0].args,
            (std::vector<std::string>{"--deepspeed", "ds_config.json", "--zero-stage", "3"}));
  const auto& eval = s.commands[1];
  EXPECT_EQ(eval.launcher, "srun");
  EXPECT_EQ(eval.wrappers, (std::vector<std::string>{"srun", "apptainer", "python"}));
  EXPECT_EQ(eval.container_image, "pytorch_24.01.sif");
  EXPECT_EQ(eval.program, "-m eval.run");
  EXPECT_EQ(eval.args, (std::vector<std::string>{"--ckpt", "last"}));
}

TEST(JobScriptTest, DoubleDashEndsLauncherOptions) {
  // `--` alone ends a launcher's options, as torchrun and deepspeed read it; a fuzzer found that
  // the launcher reader threw std::out_of_range on it (the server or `predict` would abort).
  JobScript s = ParseString(
      "#!/bin/bash\n#SBATCH -c 4\ndeepspeed --num_gpus 8 -- train.py --lr 3\ndeepspeed --\n"
      "torchrun ---- --- train.py\n");
  ASSERT_EQ(s.commands.size(), 3u);
  EXPECT_EQ(s.commands[0].launcher, "deepspeed");
  EXPECT_EQ(s.commands[0].program, "train.py");
  EXPECT_EQ(s.commands[0].args, (std::vector<std::string>{"--lr", "3"}));
  // A word of dashes only is an unknown option, not a crash.
  EXPECT_EQ(s.commands[2].launcher, "torchrun");
  EXPECT_EQ(s.commands[2].program, "train.py");
}

TEST(JobScriptTest, WholeNodeMemoryUnlimitedTimeLoopsAndHeredocs) {
  JobScript s = Parse("python_module.sh");
  EXPECT_TRUE(s.warnings.empty()) << ::testing::PrintToString(Warnings(s));
  // --mem=0 is "all of the node's memory", never zero bytes.
  EXPECT_TRUE(s.mem_whole_node);
  EXPECT_FALSE(s.request.memory_bytes.has_value());
  EXPECT_EQ(s.request.memory_scope, MemoryScope::kPerNode);
  // --time=0 is no limit.
  EXPECT_TRUE(s.request.time_unlimited);
  EXPECT_FALSE(s.request.time_limit_s.has_value());

  std::vector<std::string> programs;
  for (const auto& c : s.commands) programs.push_back(c.program);
  EXPECT_EQ(programs,
            (std::vector<std::string>{"set", "cd", "mkdir", "-m etl.daily", "-", "echo"}));
  const JobScript::Command* main = s.MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->program, "-m etl.daily");
  EXPECT_EQ(main->line, 10);
  EXPECT_EQ(main->args, (std::vector<std::string>{"--day", "$day"}));
}

TEST(JobScriptTest, CommandLineArgumentsOverrideDirectives) {
  JobScript s = Parse("array_job.sh",
                      {"-c", "8", "--mem-per-cpu=2G", "--time=2:00:00", "--array=0-3", "-pbigmem"});
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  EXPECT_DOUBLE_EQ(*s.request.cpus, 8);
  // A memory option on the command line replaces the script's --mem.
  EXPECT_EQ(s.request.memory_scope, MemoryScope::kPerCpu);
  EXPECT_EQ(*s.request.memory_bytes, 8 * 2 * kGiB);
  EXPECT_FALSE(s.mem_per_node_bytes.has_value());
  EXPECT_EQ(*s.request.time_limit_s, 7200);
  EXPECT_EQ(s.array_tasks, 4);
  EXPECT_EQ(s.request.partition, "bigmem");
  // The directives stay as written in the script.
  EXPECT_EQ(FindDirective(s, "cpus-per-task")->value, "4");

  JobScript bare = Parse("no_directives.sh", {"-c", "8", "--mem=32G", "-t", "2:00:00"});
  EXPECT_TRUE(bare.directives.empty());
  EXPECT_DOUBLE_EQ(*bare.request.cpus, 8);
  EXPECT_EQ(*bare.request.memory_bytes, 32 * kGiB);
  EXPECT_EQ(bare.MainCommand()->program, "./bin/simulate");

  JobScript bad = Parse("no_directives.sh", {"--mem=huge"});
  ASSERT_EQ(bad.warnings.size(), 1u);
  EXPECT_EQ(bad.warnings[0].ToString(),
            "command line: --mem: expected a size like 4G, 4000M or 4000 (MiB), got 'huge'");
}

TEST(JobScriptTest, GresListsNodeRangesArrayStepsAndPrefixes) {
  JobScript s = Parse("gres_mixed.sh");
  EXPECT_TRUE(s.warnings.empty()) << Warnings(s).front();
  EXPECT_EQ(*s.request.nodes, 2);  // "2-4": the minimum
  EXPECT_DOUBLE_EQ(*s.request.cpus, 2 * 2 * 6);
  EXPECT_EQ(*s.request.gpus, 4);  // gpu:v100:2 per node; the shard does not count
  EXPECT_EQ(s.request.gpu_type, "v100");
  EXPECT_EQ(*s.request.memory_bytes, 2 * 64 * kGiB);
  EXPECT_EQ(s.array_tasks, 5);            // 0,4,8,12 and 100
  EXPECT_EQ(s.request.partition, "gpu");  // --part is a unique prefix of --partition
  EXPECT_EQ(FindDirective(s, "partition")->value, "gpu");
  EXPECT_EQ(FindDirective(s, "cpus-per-task")->line, 6);
  const JobScript::Command* main = s.MainCommand();
  ASSERT_NE(main, nullptr);
  EXPECT_EQ(main->launcher, "mpiexec");
  EXPECT_EQ(main->wrappers, (std::vector<std::string>{"mpiexec", "python"}));
  EXPECT_EQ(main->program, "solver.py");
}

TEST(JobScriptTest, NotABatchScriptIsBadInput) {
  auto binary = ParseJobScriptFile(ScriptPath("binary.bin"));
  ASSERT_FALSE(binary.ok());
  EXPECT_EQ(binary.status().code(), Status::Code::kBadInput);
  EXPECT_NE(binary.status().message().find("binary"), std::string::npos);
  EXPECT_NE(binary.status().message().find("binary.bin"), std::string::npos);

  auto empty = ParseJobScriptFile(ScriptPath("comments_only.sh"));
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), Status::Code::kBadInput);
  EXPECT_NE(empty.status().message().find("no #SBATCH directive and no command"),
            std::string::npos);

  auto missing = ParseJobScriptFile(ScriptPath("does_not_exist.sh"));
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), Status::Code::kNotFound);

  EXPECT_FALSE(ParseJobScript("").ok());
}

TEST(JobScriptTest, AllOfSbatchTimeFormats) {
  struct Case {
    const char* value;
    int64_t seconds;
  };
  for (const Case& c : {Case{"90", 5400}, Case{"1:30", 120},  // seconds round up to a minute
                        Case{"2:00", 120}, Case{"01:02:03", 3780}, Case{"3-12", 3 * 86400 + 43200},
                        Case{"1-02:30", 86400 + 9000}, Case{"1-00:00:01", 86460}}) {
    JobScript s = ParseString(std::string("#!/bin/bash\n#SBATCH -t ") + c.value + "\nhostname\n");
    ASSERT_TRUE(s.request.time_limit_s.has_value()) << c.value;
    EXPECT_EQ(*s.request.time_limit_s, c.seconds) << c.value;
  }
  JobScript unlimited = ParseString("#!/bin/bash\n#SBATCH --time=UNLIMITED\nhostname\n");
  EXPECT_TRUE(unlimited.request.time_unlimited);
  // A part too large to be a limit is refused with the usual warning, never wrapped into a
  // negative or tiny limit (200000000000000000 minutes wrapped to a negative limit before).
  for (const char* huge :
       {"200000000000000000", "200000000000000000-1", "5124095576030431:00:00"}) {
    JobScript s = ParseString(std::string("#!/bin/bash\n#SBATCH --time=") + huge + "\nhostname\n");
    EXPECT_FALSE(s.request.time_limit_s.has_value()) << huge;
    EXPECT_FALSE(s.request.time_unlimited) << huge;
    EXPECT_TRUE(HasWarning(s, "line 2: --time: expected a time")) << huge;
  }
  JobScript attached = ParseString("#!/bin/bash\n#SBATCH -c4 -N1 -n2 --gpus=2\nhostname\n");
  EXPECT_DOUBLE_EQ(*attached.request.cpus, 8);
  EXPECT_EQ(*attached.request.gpus, 2);
}

TEST(JobScriptTest, TotalsNoJobCanGetAreWarnedAboutNotWrapped) {
  // 480 GiB on each of 422,222,222 nodes wrapped an int64 into a negative request (found by the
  // jobscript fuzz campaign); a billion tasks per node on a billion nodes wrapped an int.
  JobScript mem = ParseString("#!/bin/bash\n#SBATCH -N 422222222\n#SBATCH --mem=480G\nhostname\n");
  EXPECT_FALSE(mem.request.memory_bytes.has_value());
  EXPECT_TRUE(HasWarning(mem,
                         "line 3: --mem: 2.18e+20 bytes in all is more than any job can get; "
                         "reading it as no memory request"))
      << ::testing::PrintToString(Warnings(mem));
  EXPECT_EQ(*mem.request.nodes, 422222222);

  JobScript cpus = ParseString(
      "#!/bin/bash\n#SBATCH -N 1000000000\n#SBATCH --ntasks-per-node=1000000000\n"
      "#SBATCH --mem-per-cpu=1G\nhostname\n");
  EXPECT_FALSE(cpus.request.cpus.has_value());
  EXPECT_FALSE(cpus.request.memory_bytes.has_value());
  EXPECT_TRUE(HasWarning(cpus,
                         "line 3: 1000000000000000000 CPUs in all is more than any job can get "
                         "(at most 100,000,000); reading it as no CPU request"))
      << ::testing::PrintToString(Warnings(cpus));

  // Large but possible totals are kept.
  JobScript big = ParseString("#!/bin/bash\n#SBATCH -N 10000\n#SBATCH --mem=4T\nhostname\n");
  EXPECT_EQ(*big.request.memory_bytes, 10000 * 4 * 1024 * kGiB);
  EXPECT_TRUE(big.warnings.empty());
}

TEST(JobScriptTest, ConflictingMemoryOptionsAreFlagged) {
  JobScript s = ParseString(
      "#!/bin/bash\n#SBATCH --mem=8G\n#SBATCH --mem-per-cpu=1G\n#SBATCH -c 4\nhostname\n");
  EXPECT_TRUE(HasWarning(s,
                         "line 3: --mem-per-cpu: --mem, --mem-per-cpu and --mem-per-gpu are "
                         "mutually exclusive"))
      << ::testing::PrintToString(Warnings(s));
  EXPECT_EQ(s.request.memory_scope, MemoryScope::kPerCpu);
  EXPECT_EQ(*s.request.memory_bytes, 4 * kGiB);
}

TEST(JobScriptTest, BodyHashIgnoresResourcesCommentsAndIndentation) {
  JobScript a =
      ParseString("#!/bin/bash\n#SBATCH --mem=4G\n# train\n  srun python train.py   --lr 1\n");
  JobScript b = ParseString(
      "#!/bin/bash\n#SBATCH --mem=64G\n#SBATCH -c 8\n\nsrun python train.py --lr 1  # go\n");
  JobScript c = ParseString("#!/bin/bash\n#SBATCH --mem=4G\nsrun python train.py --lr 2\n");
  EXPECT_EQ(a.body_hash.size(), 16u);
  EXPECT_EQ(a.body_hash, b.body_hash);
  EXPECT_NE(a.body_hash, c.body_hash);
}

TEST(JobScriptTest, ShellSyntaxAroundCommands) {
  JobScript s = ParseString(
      "#!/bin/bash\n"
      "#SBATCH -n 1\n"
      "export A=1 B=\"two words\"\n"
      "CUDA_VISIBLE_DEVICES=0 python3 -u run.py 2>&1 | tee run.log\n"
      "if [ -f done ]; then exit 0; fi\n"
      "case $SLURM_ARRAY_TASK_ID in\n"
      "  1) numactl --cpunodebind=0 ./a.out ;;\n"
      "esac\n"
      "time srun -l --mpi=pmix -n4 ./b.out &\n"
      "wait\n");
  EXPECT_EQ(s.env.at("A"), "1");
  EXPECT_EQ(s.env.at("B"), "two words");
  EXPECT_EQ(s.env.at("CUDA_VISIBLE_DEVICES"), "0");
  std::vector<std::string> programs;
  for (const auto& c : s.commands) programs.push_back(c.program);
  EXPECT_EQ(programs,
            (std::vector<std::string>{"run.py", "tee", "exit", "./a.out", "./b.out", "wait"}));
  EXPECT_EQ(s.commands[4].launcher, "srun");
  EXPECT_EQ(s.commands[4].line, 9);
  EXPECT_EQ(s.MainCommand()->program, "./b.out");
}

TEST(JobScriptTest, OddShellDoesNotStopTheParser) {
  for (const char* text :
       {"#!/bin/bash\necho \"unterminated\n", "#!/bin/bash\nsrun\n", "#!/bin/bash\ncat <<\n",
        "#!/bin/bash\nls \\", "#!/bin/bash\n#SBATCH -n 1\n2>\n", "#!/bin/bash\necho $(date\n",
        "#!/bin/bash\n#SBATCH -c\n#SBATCH --\n", "#!/bin/bash\npython -m\ntorchrun -m\n",
        "#!/bin/bash\n>&2 echo x &&\n", "#!/bin/bash\nmpirun --mca\napptainer exec\nenv\n"}) {
    auto s = ParseJobScript(text);
    EXPECT_TRUE(s.ok()) << text << ": " << s.status().ToString();
  }
  auto needs_value = ParseJobScript("#!/bin/bash\n#SBATCH -c\nhostname\n");
  ASSERT_TRUE(needs_value.ok());
  EXPECT_EQ(needs_value->warnings.at(0).ToString(), "line 2: -c needs a value");
}
// Issue 31: `--gres=gpu:-1` was read as one GPU of type "-1", silently.
TEST(JobScriptTest, NegativeOrAbsurdGpuCountsWarnNamingTheLine) {
  JobScript s = ParseString(
      "#!/bin/bash\n"
      "#SBATCH --gres=gpu:-1\n"
      "srun ./app\n");
  EXPECT_EQ(*s.request.gpus, 0);
  ASSERT_EQ(s.warnings.size(), 1u);
  EXPECT_EQ(s.warnings[0].ToString(),
            "line 2: --gres: expected resources like gpu:a100:2, got 'gpu:-1'");

  JobScript big = ParseString(
      "#!/bin/bash\n"
      "#SBATCH --gpus-per-node=a100:8\n"
      "#SBATCH --gpus=2000000\n"
      "srun ./app\n");
  ASSERT_EQ(big.warnings.size(), 1u);
  EXPECT_EQ(big.warnings[0].line, 3);

  JobScript total = ParseString(
      "#!/bin/bash\n"
      "#SBATCH -N 1000000\n"
      "#SBATCH --gpus-per-node=1000\n"
      "srun ./app\n");
  EXPECT_EQ(*total.request.gpus, 0);
  ASSERT_EQ(total.warnings.size(), 1u);
  EXPECT_EQ(total.warnings[0].ToString(),
            "line 3: 1000000000 GPUs in all (1000 x 1000000) is more than any job can get (at "
            "most 1,000,000); reading it as no GPU request");
}

// README: "a file that is not a job script is a clear error (exit 2)".
TEST(JobScriptTest, PlainTextIsNotABatchScript) {
  auto s = ParseJobScript("hello, this is a plain text file\nwith two lines\n");
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), Status::Code::kBadInput);
  EXPECT_NE(s.status().message().find("not a batch script: no #! line and no #SBATCH directive"),
            std::string::npos)
      << s.status().message();
}

}  // namespace
}  // namespace rightsize
