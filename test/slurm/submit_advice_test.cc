// slurm::AdviseSubmit and its pieces: the #SBATCH changes a prediction suggests, where they are
// made, the rewritten script and its unified diff.
#include "slurm/submit_advice.h"

#include <gtest/gtest.h>

#include "core/units.h"

namespace rightsize::slurm {
namespace {

const char* const kScript =
    "#!/bin/bash\n"
    "#SBATCH --job-name=train\n"
    "#SBATCH --mem=16G --time=2:00:00 -c 8\n"
    "#SBATCH --output=slurm-%j.out\n"
    "\n"
    "srun python train.py\n";

// A rightsize.predict/v1 document with these suggested requests.
nlohmann::json Prediction(double mem_bytes, double runtime_s, double cpus) {
  return {{"schema", "rightsize.predict/v1"},
          {"cluster", "rstest"},
          {"targets",
           {{"peak_memory",
             {{"unit", "bytes"},
              {"p50", 4.0 * kGiB},
              {"p90", 5.0 * kGiB},
              {"suggested_request", mem_bytes}}},
            {"runtime",
             {{"unit", "s"}, {"p50", 1800.0}, {"p90", 2700.0}, {"suggested_request", runtime_s}}},
            {"cpu_cores",
             {{"unit", "cores"}, {"p50", 2.5}, {"p90", 3.0}, {"suggested_request", cpus}}}}}};
}

SubmitAdvice Advise(const nlohmann::json& doc, const std::string& text,
                    const std::vector<std::string>& args = {}) {
  auto script = ParseJobScript(text, args);
  EXPECT_TRUE(script.ok()) << script.status().message();
  return AdviseSubmit(doc, *script, args, text, "job.sh");
}

TEST(SubmitAdviceTest, RewritesTheDirectivesWhereTheyAre) {
  SubmitAdvice a = Advise(Prediction(6.0 * kGiB, 3000, 3.2), kScript);
  ASSERT_EQ(a.changes.size(), 3u);
  const Change& mem = a.changes[0];
  EXPECT_EQ(mem.option, "mem");
  EXPECT_EQ(mem.from, "16G");
  EXPECT_EQ(mem.to, "6G");
  EXPECT_EQ(mem.where, "script");
  EXPECT_EQ(mem.line, 3);
  EXPECT_EQ(mem.why, "predicted peak memory p50 4G, p90 5G; 16G asked");
  const Change& time = a.changes[1];
  EXPECT_EQ(time.option, "time");
  EXPECT_EQ(time.from, "2:00:00");
  EXPECT_EQ(time.to, "00:50:00");
  EXPECT_EQ(time.line, 3);
  EXPECT_EQ(time.why, "predicted run time p50 00:30:00, p90 00:45:00; 02:00:00 asked");
  const Change& cpus = a.changes[2];
  EXPECT_EQ(cpus.option, "cpus-per-task");
  EXPECT_EQ(cpus.from, "8");
  EXPECT_EQ(cpus.to, "4");
  EXPECT_EQ(cpus.why, "predicted CPU use p50 2.5, p90 3.0 cores");

  EXPECT_TRUE(a.args.empty());
  EXPECT_TRUE(a.script_changed);
  EXPECT_EQ(a.script,
            "#!/bin/bash\n"
            "#SBATCH --job-name=train\n"
            "#SBATCH --mem=6G --time=00:50:00 --cpus-per-task=4\n"
            "#SBATCH --output=slurm-%j.out\n"
            "\n"
            "srun python train.py\n");
  EXPECT_EQ(a.diff,
            "--- job.sh\n"
            "+++ job.sh (suggested)\n"
            "@@ -1,6 +1,6 @@\n"
            " #!/bin/bash\n"
            " #SBATCH --job-name=train\n"
            "-#SBATCH --mem=16G --time=2:00:00 -c 8\n"
            "+#SBATCH --mem=6G --time=00:50:00 --cpus-per-task=4\n"
            " #SBATCH --output=slurm-%j.out\n"
            " \n"
            " srun python train.py\n");
}

TEST(SubmitAdviceTest, AValueGivenOnTheCommandLineIsChangedThere) {
  const char* text =
      "#!/bin/bash\n"
      "#SBATCH --time=2:00:00\n"
      "srun python train.py\n";
  SubmitAdvice a =
      Advise(Prediction(6.0 * kGiB, 7200, 3.2), text, {"--mem", "16G", "-c8", "-p", "gpu"});
  ASSERT_EQ(a.changes.size(), 2u);
  EXPECT_EQ(a.changes[0].option, "mem");
  EXPECT_EQ(a.changes[0].where, "command line");
  EXPECT_EQ(a.changes[0].from, "16G");
  EXPECT_EQ(a.changes[0].line, 0);
  EXPECT_EQ(a.changes[1].option, "cpus-per-task");
  EXPECT_EQ(a.changes[1].where, "command line");
  EXPECT_EQ(a.changes[1].from, "8");
  EXPECT_EQ(a.args, (std::vector<std::string>{"--mem", "6G", "--cpus-per-task=4", "-p", "gpu"}));
  // Nothing to change in the script itself.
  EXPECT_FALSE(a.script_changed);
  EXPECT_EQ(a.script, text);
  EXPECT_EQ(a.diff, "");
}

TEST(SubmitAdviceTest, AMissingOptionIsAddedAfterTheLastDirective) {
  const std::string text =
      "#!/bin/bash\n"
      "#SBATCH --mem=16G\n"
      "#SBATCH -J train\n"
      "srun python train.py\n";
  std::vector<Change> changes = {{"time", "", "01:00:00", "added", 0, "why"}};
  std::string diff;
  std::string out = ApplyToScript(text, &changes, "job.sh", &diff);
  EXPECT_EQ(out,
            "#!/bin/bash\n"
            "#SBATCH --mem=16G\n"
            "#SBATCH -J train\n"
            "#SBATCH --time=01:00:00\n"
            "srun python train.py\n");
  EXPECT_EQ(changes[0].line, 4) << "the new line's number";
  EXPECT_EQ(diff,
            "--- job.sh\n"
            "+++ job.sh (suggested)\n"
            "@@ -1,4 +1,5 @@\n"
            " #!/bin/bash\n"
            " #SBATCH --mem=16G\n"
            " #SBATCH -J train\n"
            "+#SBATCH --time=01:00:00\n"
            " srun python train.py\n");

  // No directive at all: after the shebang.
  std::vector<Change> more = {{"mem", "", "6G", "added", 0, "why"}};
  EXPECT_EQ(ApplyToScript("#!/bin/sh\nsrun a.out\n", &more, "job.sh", &diff),
            "#!/bin/sh\n#SBATCH --mem=6G\nsrun a.out\n");
  EXPECT_EQ(more[0].line, 2);
}

TEST(SubmitAdviceTest, SmallDifferencesAreNoAdvice) {
  // 15G for 16G, 7000 s for 2 h, 7.5 cores for 8: each under kMinChange (10%).
  SubmitAdvice a = Advise(Prediction(15.0 * kGiB, 7000, 7.5), kScript, {"--mem=16G"});
  EXPECT_TRUE(a.changes.empty());
  EXPECT_EQ(a.args, std::vector<std::string>{"--mem=16G"});
  EXPECT_FALSE(a.script_changed);
  EXPECT_EQ(a.script, kScript);
  EXPECT_EQ(a.diff, "");
  // Just over 10% is a change.
  EXPECT_EQ(Advise(Prediction(14.0 * kGiB, 7000, 7.5), kScript).changes.size(), 1u);
}

TEST(SubmitAdviceTest, APredictionWithoutTargetsSuggestsNothing) {
  SubmitAdvice a = Advise({{"schema", "rightsize.predict/v1"}}, kScript);
  EXPECT_TRUE(a.changes.empty());
  EXPECT_EQ(a.script, kScript);
}

TEST(SubmitAdviceTest, NoChangesSaysAtWhichRiskThereWouldBe) {
  // The request kept at the risk asked for: the prediction says the lowest risk that cuts it.
  nlohmann::json doc = Prediction(16.0 * kGiB, 7200, 8);
  SubmitAdvice a = Advise(doc, kScript);
  ASSERT_TRUE(a.changes.empty());
  EXPECT_EQ(SubmitAdviceText(a, {}, false, &doc), "no changes suggested\n");
  doc["targets"]["peak_memory"]["suggested_at_risk"] = 0.05;
  doc["targets"]["runtime"]["suggested_at_risk"] = 0.1;
  EXPECT_EQ(SubmitAdviceText(a, {}, false, &doc),
            "no changes suggested at this risk; at --risk 0.05 some are (the notes above say "
            "why)\n");
}

TEST(SubmitAdviceTest, SbatchValues) {
  // The one rule (core/units.h) that submit's flags are written with.
  EXPECT_EQ(MemoryFlagValue(6 * kGiB), "6G");
  EXPECT_EQ(MemoryFlagValue(kGiB + kGiB / 2), "1536M");
  EXPECT_EQ(MemoryFlagValue(100 * kMiB + 1), "101M");
  EXPECT_EQ(TimeFlagValue(3000), "00:50:00");
  EXPECT_EQ(TimeFlagValue(3001), "00:51:00");
  EXPECT_EQ(RoundMemoryRequest(3.1 * kGiB), 3 * kGiB + kGiB / 4);
  EXPECT_EQ(RoundMemoryRequest(4.1 * kGiB), 5 * kGiB);
  EXPECT_EQ(RoundTimeRequest(61), 120);
  EXPECT_EQ(RoundCpuRequest(0.2), 1);
}

}  // namespace
}  // namespace rightsize::slurm
