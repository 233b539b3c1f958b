// The DaemonSet agent (agent --kubernetes): containers found in the kubepods cgroups, named by a
// fake kubelet (its /pods over HTTP and its PodResources v1 gRPC API over a unix socket), their
// GPU memory from the fake NVML, their end and diagnosis.
//
// The real-cgroup tests lay out kubepods under this machine's cgroup v1 hierarchies as the
// kubelet and containerd do (both cgroup drivers), move real processes in and remove every
// group they made; they need root (make test runs as root). The v2 layout is read from a fake
// tree given as the cgroup root.
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "agent/agent.h"
#include "agent/cgroup.h"
#include "agent/cri_log.h"
#include "agent/gpu.h"
#include "agent/kubelet.h"
#include "agent/proc.h"
#include "agent/shipper.h"
#include "podresources/api.grpc.pb.h"

namespace rightsize {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr char kUidA[] = "3f1c9a2e-1111-2222-3333-444455556666";
constexpr char kUidB[] = "7d0e5b1a-aaaa-bbbb-cccc-ddddeeeeffff";
const std::string kCidA(64, 'a');
const std::string kCidB(64, 'b');
const std::string kCidSandbox(64, 'c');
// The OOM test's own pods, so that the real-cgroup tests can run side by side.
constexpr char kUidC[] = "0c0c0c0c-1111-2222-3333-444455556666";
constexpr char kUidD[] = "0d0d0d0d-1111-2222-3333-444455556666";
const std::string kCidC(64, 'e');
const std::string kCidD(64, 'f');
// The kept-files test's container.
constexpr char kUidE[] = "0e0e0e0e-1111-2222-3333-444455556666";
const std::string kCidE(64, '9');

class TempDir {
 public:
  TempDir() {
    path_ = fs::temp_directory_path() /
            ("rs_kube_" + std::to_string(getpid()) + "_" + std::to_string(counter_++));
    fs::create_directories(path_);
  }
  ~TempDir() { fs::remove_all(path_); }
  void Write(const std::string& rel, const std::string& text) const {
    fs::path p = path_ / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p, std::ios::binary) << text;
  }
  std::string path() const { return path_.string(); }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// --- cgroup v2 layout, from a fake tree ------------------------------------------------------

TEST(KubeCgroupTest, FindsContainersOfBothDriversOnAV2Tree) {
  TempDir t;
  t.Write("cgroup.controllers", "cpuset cpu io memory hugetlb pids\n");
  const std::string fs_path = std::string("/kubepods/burstable/pod") + kUidA + "/" + kCidA;
  const std::string sd_pod = std::string("/kubepods.slice/kubepods-besteffort.slice/") +
                             "kubepods-besteffort-pod7d0e5b1a_aaaa_bbbb_cccc_ddddeeeeffff.slice";
  const std::string sd_path = sd_pod + "/crio-" + kCidB + ".scope";
  const std::string guaranteed =
      "/kubepods.slice/kubepods-pod11111111_2222_3333_4444_555555555555.slice/docker-" +
      std::string(64, 'd') + ".scope";
  t.Write(fs_path.substr(1) + "/cgroup.procs", "101\n102\n");
  t.Write(fs_path.substr(1) + "/memory.current", "1048576\n");
  t.Write(fs_path.substr(1) + "/memory.peak", "52428800\n");
  t.Write(fs_path.substr(1) + "/memory.max", "67108864\n");
  t.Write(fs_path.substr(1) + "/memory.events",
          "low 0\nhigh 0\nmax 14\noom 1\noom_kill 1\noom_group_kill 0\n");
  t.Write(fs_path.substr(1) + "/cpu.stat",
          "usage_usec 2500000\nuser_usec 2000000\nsystem_usec 500000\nnr_periods 10\n"
          "nr_throttled 4\nthrottled_usec 300000\n");
  // A nested cgroup inside the container is the container's, not another container.
  t.Write(fs_path.substr(1) + "/init/cgroup.procs", "");
  t.Write(sd_path.substr(1) + "/cgroup.procs", "0\n");  // outside the agent's PID namespace
  t.Write(sd_path.substr(1) + "/memory.current", "4096\n");
  t.Write(sd_pod.substr(1) + "/crio-conmon-" + kCidB + ".scope/cgroup.procs", "7\n");
  t.Write(guaranteed.substr(1) + "/cgroup.procs", "");
  t.Write("system.slice/containerd.service/cgroup.procs", "1\n");

  CgroupFs cgroups(t.path());
  ASSERT_TRUE(cgroups.v2());
  std::vector<CgroupJob> found = cgroups.KubeContainers();
  ASSERT_EQ(found.size(), 3u);
  std::map<std::string, CgroupJob> by_path;
  for (auto& c : found) by_path[c.container_path] = c;
  ASSERT_TRUE(by_path.count(fs_path));
  EXPECT_EQ(by_path[fs_path].job_id, kUidA);
  EXPECT_EQ(by_path[fs_path].container_id, kCidA);
  EXPECT_EQ(by_path[fs_path].qos, "burstable");
  ASSERT_TRUE(by_path.count(sd_path));
  EXPECT_EQ(by_path[sd_path].job_id, kUidB);  // "_" read back as "-"
  EXPECT_EQ(by_path[sd_path].container_id, kCidB);
  EXPECT_EQ(by_path[sd_path].qos, "besteffort");
  ASSERT_TRUE(by_path.count(guaranteed));
  EXPECT_EQ(by_path[guaranteed].qos, "guaranteed");

  // Between full listings, a pod is listed again when its count of containers changed.
  auto has = [](const std::vector<CgroupJob>& found, const std::string& path) {
    return std::any_of(found.begin(), found.end(),
                       [&](const CgroupJob& c) { return c.container_path == path; });
  };
  const std::string fs_new = std::string("/kubepods/burstable/pod") + kUidA + "/" + kCidB;
  t.Write(fs_new.substr(1) + "/cgroup.procs", "103\n");
  std::vector<CgroupJob> again = cgroups.KubeContainers(false);
  EXPECT_EQ(again.size(), 4u);
  EXPECT_TRUE(has(again, fs_new));
  // One replaced by another between two listings (the same count): a full listing finds it.
  const std::string fs_other = std::string("/kubepods/burstable/pod") + kUidA + "/" + kCidC;
  fs::remove_all(t.path() + fs_new);
  t.Write(fs_other.substr(1) + "/cgroup.procs", "104\n");
  std::vector<CgroupJob> all = cgroups.KubeContainers(true);
  EXPECT_EQ(all.size(), 4u);
  EXPECT_TRUE(has(all, fs_other));
  EXPECT_FALSE(has(all, fs_new));
  fs::remove_all(t.path() + fs_other);
  EXPECT_EQ(cgroups.KubeContainers(false).size(), 3u);

  EXPECT_EQ(cgroups.Procs(fs_path), (std::vector<int64_t>{101, 102}));
  EXPECT_TRUE(cgroups.Procs(sd_path).empty());
  auto c = cgroups.Read(fs_path);
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->memory_peak_bytes, 52428800);
  EXPECT_EQ(c->memory_limit_bytes, 67108864);
  EXPECT_EQ(c->oom_kills, 1);
  EXPECT_DOUBLE_EQ(*c->cpu_s, 2.5);
  EXPECT_EQ(c->throttled_periods, 4);

  // Seen from the agent's own cgroup namespace, a host path starts with "/..".
  auto seen = JobFromCgroupPath("/../../kubepods/burstable/pod" + std::string(kUidA) + "/" + kCidA);
  ASSERT_TRUE(seen.has_value());
  EXPECT_EQ(seen->container_path, fs_path);

  // No kubepods at all: nothing, not an error.
  TempDir empty;
  empty.Write("cgroup.controllers", "memory\n");
  EXPECT_TRUE(CgroupFs(empty.path()).KubeContainers().empty());
}

// --- CRI logs ---------------------------------------------------------------------------------

void WriteGzip(const std::string& path, const std::string& text) {
  gzFile f = gzopen(path.c_str(), "wb");
  ASSERT_NE(f, nullptr);
  gzwrite(f, text.data(), static_cast<unsigned>(text.size()));
  gzclose(f);
}

TEST(CriLogTest, JoinsPartialLinesAcrossRotatedAndGzippedFiles) {
  TempDir t;
  const std::string dir = t.path() + "/ml_train-abc_" + std::string(kUidA) + "/trainer";
  fs::create_directories(dir);
  WriteGzip(dir + "/0.log.20260101-000000.gz",
            "2026-01-01T00:00:00.000000001Z stdout F epoch 1\n"
            "2026-01-01T00:00:00.5+01:00 stderr P a long line the runtime split: part 1 -- \n");
  std::ofstream(dir + "/0.log.20260101-010000")
      << "2026-01-01T01:00:00.100000000Z stderr P part 2 -- \n"
      << "2026-01-01T01:00:00.200000000Z stderr F part 3\n"
      << "not a CRI line\n";
  std::ofstream(dir + "/0.log") << "{\"log\":\"docker form\\n\",\"stream\":\"stdout\",\"time\":"
                                   "\"2026-01-01T02:00:00Z\"}\n"
                                << "2026-01-01T02:00:01.000000000Z stdout F last line\n";
  std::ofstream(dir + "/0.log.20260101-020000.tmp") << "ignored\n";
  std::ofstream(dir + "/1.log") << "2026-01-01T03:00:00Z stdout F the next instance\n";

  auto files = ContainerLogFiles(t.path(), "ml", "train-abc", kUidA, "trainer", 0);
  ASSERT_EQ(files.size(), 3u);
  EXPECT_EQ(fs::path(files[0]).filename(), "0.log.20260101-000000.gz");
  EXPECT_EQ(fs::path(files[2]).filename(), "0.log");
  auto log = ReadCriLogs(files);
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  EXPECT_EQ(log->text,
            "epoch 1\n"
            "a long line the runtime split: part 1 -- part 2 -- part 3\n"
            "docker form\n"
            "last line\n");
  EXPECT_EQ(log->bad_lines, 1);
  // An instance that left no file: the newest one's.
  auto newest = ContainerLogFiles(t.path(), "ml", "train-abc", kUidA, "trainer", 7);
  ASSERT_EQ(newest.size(), 1u);
  EXPECT_EQ(fs::path(newest[0]).filename(), "1.log");
  EXPECT_FALSE(ReadCriLogs({}).ok());
  EXPECT_FALSE(ReadCriLogs({t.path() + "/missing.log"}).ok());
}

// --- a fake kubelet ---------------------------------------------------------------------------

json PodJson(const std::string& ns, const std::string& name, const std::string& uid,
             const std::string& qos, const std::string& owner_kind, const std::string& owner,
             const std::string& container, const std::string& cid, const json& resources,
             const json& state) {
  json pod = {{"metadata",
               {{"name", name},
                {"namespace", ns},
                {"uid", uid},
                {"generateName", owner + "-"},
                {"labels", {{"app", owner}}},
                {"ownerReferences",
                 {{{"apiVersion", "batch/v1"},
                   {"kind", owner_kind},
                   {"name", owner},
                   {"uid", "0000"},
                   {"controller", true}}}}}},
              {"spec",
               {{"containers",
                 {{{"name", container},
                   {"image", "ghcr.io/lab/train:v2"},
                   {"command", {"python", "train.py"}},
                   {"args", {"--epochs", "3"}},
                   {"resources", resources}}}},
                {"nodeName", "node-1"}}},
              {"status",
               {{"phase", "Running"},
                {"qosClass", qos},
                {"containerStatuses",
                 {{{"name", container},
                   {"containerID", "containerd://" + cid},
                   {"image", "ghcr.io/lab/train:v2"},
                   {"restartCount", 0},
                   {"ready", true},
                   {"state", state},
                   {"lastState", json::object()}}}}}}};
  return pod;
}

json Running() { return {{"running", {{"startedAt", "2026-01-01T00:00:00Z"}}}}; }
json Terminated(int code, const std::string& reason) {
  return {{"terminated",
           {{"exitCode", code},
            {"reason", reason},
            {"startedAt", "2026-01-01T00:00:00Z"},
            {"finishedAt", "2026-01-01T00:01:00Z"},
            {"containerID", "containerd://x"}}}};
}

class FakePodResources final : public v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const v1::ListPodResourcesRequest*,
                    v1::ListPodResourcesResponse* out) override {
    std::lock_guard<std::mutex> lock(mu_);
    *out = response_;
    ++calls_;
    return grpc::Status::OK;
  }
  void Set(v1::ListPodResourcesResponse r) {
    std::lock_guard<std::mutex> lock(mu_);
    response_ = std::move(r);
  }
  int calls() {
    std::lock_guard<std::mutex> lock(mu_);
    return calls_;
  }

 private:
  std::mutex mu_;
  v1::ListPodResourcesResponse response_;
  int calls_ = 0;
};

// The kubelet's two doors: GET /pods (bearer token required) and PodResources on a unix socket.
class FakeKubelet {
 public:
  explicit FakeKubelet(const std::string& dir) : socket_(dir + "/kubelet.sock") {
    http_.Get("/pods", [this](const httplib::Request& req, httplib::Response& res) {
      if (req.get_header_value("Authorization") != "Bearer sekrit") {
        res.status = 401;
        return;
      }
      std::lock_guard<std::mutex> lock(mu_);
      res.set_content(pods_.dump(), "application/json");
    });
    port_ = http_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { http_.listen_after_bind(); });
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix://" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&resources_);
    grpc_ = builder.BuildAndStart();
    std::ofstream(dir + "/token") << "sekrit\n";
    token_file_ = dir + "/token";
  }
  ~FakeKubelet() {
    http_.stop();
    thread_.join();
    grpc_->Shutdown();
  }
  void SetPods(const std::vector<json>& pods) {
    std::lock_guard<std::mutex> lock(mu_);
    pods_ = {
        {"kind", "PodList"}, {"apiVersion", "v1"}, {"metadata", json::object()}, {"items", pods}};
  }
  // One container's GPUs.
  void SetGpus(const std::string& ns, const std::string& pod, const std::string& container,
               const std::vector<std::string>& uuids) {
    v1::ListPodResourcesResponse r;
    v1::PodResources* p = r.add_pod_resources();
    p->set_name(pod);
    p->set_namespace_(ns);
    v1::ContainerResources* c = p->add_containers();
    c->set_name(container);
    v1::ContainerDevices* d = c->add_devices();
    d->set_resource_name("nvidia.com/gpu");
    for (const auto& u : uuids) d->add_device_ids(u);
    resources_.Set(r);
  }
  KubeletOptions Options() const {
    KubeletOptions o;
    o.url = "http://127.0.0.1:" + std::to_string(port_);
    o.token_file = token_file_;
    o.pod_resources_socket = socket_;
    o.timeout_s = 2;
    return o;
  }
  FakePodResources& resources() { return resources_; }

 private:
  std::string socket_, token_file_;
  httplib::Server http_;
  int port_ = 0;
  std::thread thread_;
  FakePodResources resources_;
  std::unique_ptr<grpc::Server> grpc_;
  std::mutex mu_;
  json pods_ = {{"items", json::array()}};
};

TEST(KubeletTest, NamesContainersFromThePodListAndTheirGpusFromPodResources) {
  TempDir t;
  FakeKubelet kubelet(t.path());
  json limits = {{"limits", {{"cpu", "500m"}, {"memory", "64Mi"}, {"nvidia.com/gpu", "1"}}}};
  kubelet.SetPods({PodJson("ml", "nightly-29000000-x7k2p", kUidA, "Burstable", "Job",
                           "nightly-29000000", "trainer", kCidA, limits, Running())});
  kubelet.SetGpus("ml", "nightly-29000000-x7k2p", "trainer", {"GPU-aaaa"});
  Kubelet k(kubelet.Options());
  Status st = k.Refresh();
  ASSERT_TRUE(st.ok()) << st.ToString();
  const KubeContainer* c = k.Find(kCidA);
  ASSERT_NE(c, nullptr);
  EXPECT_EQ(c->JobId(), "ml/nightly-29000000-x7k2p/trainer");
  EXPECT_EQ(c->request.user, "ml");
  EXPECT_EQ(c->request.account, "ml");
  EXPECT_EQ(c->request.job_name, "nightly/trainer");  // the CronJob's stable name
  EXPECT_EQ(c->request.qos, "Burstable");
  EXPECT_EQ(c->request.memory_bytes, 64 << 20);
  EXPECT_DOUBLE_EQ(*c->request.cpus, 0.5);
  EXPECT_EQ(c->request.gpus, 1);
  EXPECT_EQ(c->gpu_uuids, (std::vector<std::string>{"GPU-aaaa"}));
  EXPECT_FALSE(c->terminated.has_value());
  EXPECT_EQ(k.Find(kCidSandbox), nullptr);
  EXPECT_GE(kubelet.resources().calls(), 1);

  // A wrong token: the kubelet says 401, the last answer stays.
  std::ofstream(t.path() + "/token") << "wrong\n";
  st = k.Refresh();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("HTTP 401"), std::string::npos) << st.message();
  EXPECT_NE(k.Find(kCidA), nullptr);
  // Not a PodList.
  EXPECT_FALSE(ContainersFromPodList(json::array()).ok());
}

// A node where the PodResources socket appears only later (the kubelet restarted, or the
// device-plugin API was enabled): the first refresh names the containers and says why there are
// no GPUs; once the socket is there the next refresh attaches them.
TEST(KubeletTest, PicksUpThePodResourcesSocketWhenItAppears) {
  TempDir t;
  FakeKubelet kubelet(t.path());
  json limits = {{"limits", {{"nvidia.com/gpu", "1"}}}};
  kubelet.SetPods({PodJson("ml", "train-x7k2p", kUidA, "Burstable", "Job", "train", "trainer",
                           kCidA, limits, Running())});
  KubeletOptions o = kubelet.Options();
  std::filesystem::create_directories(t.path() + "/later");
  o.pod_resources_socket = t.path() + "/later/kubelet.sock";
  Kubelet k(o);
  Status st = k.Refresh();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find(o.pod_resources_socket), std::string::npos) << st.message();
  ASSERT_NE(k.Find(kCidA), nullptr);
  EXPECT_TRUE(k.Find(kCidA)->gpu_uuids.empty());

  FakeKubelet restarted(t.path() + "/later");  // serves PodResources on later/kubelet.sock
  restarted.SetGpus("ml", "train-x7k2p", "trainer", {"GPU-bbbb"});
  st = k.Refresh();
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(k.Find(kCidA)->gpu_uuids, (std::vector<std::string>{"GPU-bbbb"}));
}

// A crash-looping container: each instance (each OOM kill) is a record of its own, not the
// last one overwriting the others.
TEST(KubeletTest, EachRestartOfAContainerIsARecordOfItsOwn) {
  json pod = PodJson("ml", "etl-x7k2p", kUidA, "Burstable", "Job", "etl", "main", kCidA,
                     json::object(), Running());
  json& status = pod["status"]["containerStatuses"][0];
  status["restartCount"] = 2;
  status["lastState"] = {{"terminated",
                          {{"exitCode", 137},
                           {"reason", "OOMKilled"},
                           {"containerID", "containerd://" + std::string(kCidB)}}}};
  auto containers = ContainersFromPodList({{"kind", "PodList"}, {"items", {pod}}});
  ASSERT_TRUE(containers.ok()) << containers.status().ToString();
  ASSERT_EQ(containers->count(kCidA), 1U);
  ASSERT_EQ(containers->count(kCidB), 1U);
  EXPECT_EQ(containers->at(kCidA).RecordId(), "ml/etl-x7k2p/main#2");
  EXPECT_EQ(containers->at(kCidB).RecordId(), "ml/etl-x7k2p/main#1");
  EXPECT_EQ(containers->at(kCidB).terminated->reason, "OOMKilled");
  pod["status"]["containerStatuses"][0]["restartCount"] = 0;
  pod["status"]["containerStatuses"][0]["lastState"] = json::object();
  auto first = ContainersFromPodList({{"kind", "PodList"}, {"items", {pod}}});
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->at(kCidA).RecordId(), "ml/etl-x7k2p/main");
}

// --- real cgroups (v1 hybrid on this machine) --------------------------------------------------

constexpr const char* kControllers[] = {"memory", "cpu", "cpuacct", "pids"};

// A container's cgroup made under every v1 controller, with its parents; removed (deepest
// first) when destroyed.
class RealCgroup {
 public:
  explicit RealCgroup(std::string rel) : rel_(std::move(rel)) {
    for (const char* ctl : kControllers) {
      fs::path base = fs::path("/sys/fs/cgroup") / ctl;
      fs::path p = base;
      for (const auto& part : fs::path(rel_.substr(1))) {
        p /= part;
        if (!fs::exists(p)) {
          fs::create_directory(p);
          made_.push_back(p);
        }
      }
    }
  }
  ~RealCgroup() { Remove(); }
  // Removes what it made; a parent another group still uses stays listed, for later.
  void Remove() {
    std::vector<fs::path> left;
    for (auto it = made_.rbegin(); it != made_.rend(); ++it) {
      if (rmdir(it->c_str()) != 0 && fs::exists(*it)) left.insert(left.begin(), *it);
    }
    made_ = std::move(left);
  }
  std::string Dir(const char* ctl) const { return std::string("/sys/fs/cgroup/") + ctl + rel_; }
  const std::string& rel() const { return rel_; }

 private:
  std::string rel_;
  std::vector<fs::path> made_;
};

// A process that joins `cg` (every controller), touches `mib` MiB, says so on a pipe and waits
// to be told to exit with `code`. Only async-signal-safe calls after fork.
class Worker {
 public:
  Worker(const RealCgroup& cg, int mib, int code = 0) {
    int ready[2], go[2];
    EXPECT_EQ(pipe(ready), 0);
    EXPECT_EQ(pipe(go), 0);
    std::vector<std::string> procs;
    for (const char* ctl : kControllers) procs.push_back(cg.Dir(ctl) + "/cgroup.procs");
    pid_ = fork();
    if (pid_ == 0) {
      for (const auto& p : procs) {
        int fd = open(p.c_str(), O_WRONLY);
        if (fd < 0 || write(fd, "0", 1) != 1) _exit(90);
        close(fd);
      }
      size_t bytes = static_cast<size_t>(mib) << 20;
      // In 4 MiB steps, so an OOM kill comes mid-way, as it does to a real program.
      for (size_t at = 0; at < bytes; at += 4 << 20) {
        void* m =
            mmap(nullptr, 4 << 20, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED) _exit(91);
        memset(m, 1, 4 << 20);
      }
      char c = 1;
      if (write(ready[1], &c, 1) != 1) _exit(92);
      if (read(go[0], &c, 1) < 0) _exit(93);
      _exit(code);
    }
    close(ready[1]);
    close(go[0]);
    ready_ = ready[0];
    go_ = go[1];
  }
  ~Worker() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      Wait();
    }
    close(ready_);
    close(go_);
  }
  // False when the process died before saying it was ready (an OOM kill).
  bool Ready() {
    char c = 0;
    return read(ready_, &c, 1) == 1;
  }
  int Finish() {
    char c = 1;
    (void)!write(go_, &c, 1);
    return Wait();
  }
  int Wait() {
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return status;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  int ready_ = -1, go_ = -1;
};

int64_t ReadInt(const std::string& path) { return std::stoll(ReadFile(path)); }

bool CanMakeCgroups() {
  return geteuid() == 0 && fs::exists("/sys/fs/cgroup/memory/cgroup.procs") &&
         fs::exists("/sys/fs/cgroup/cpuacct/cgroup.procs");
}

TEST(KubeAgentTest, RealCgroupsOfBothDriversNamedWithGpuMemoryAndPeaks) {
  ASSERT_TRUE(CanMakeCgroups()) << "needs root and cgroup v1 memory/cpuacct (make test runs so)";
  TempDir t;
  FakeKubelet kubelet(t.path());
  // Pod A: cgroupfs driver, burstable. Pod B: systemd driver, besteffort, containerd scope.
  RealCgroup a(std::string("/kubepods/burstable/pod") + kUidA + "/" + kCidA);
  RealCgroup sandbox(std::string("/kubepods/burstable/pod") + kUidA + "/" + kCidSandbox);
  RealCgroup b(
      "/kubepods.slice/kubepods-besteffort.slice/"
      "kubepods-besteffort-pod7d0e5b1a_aaaa_bbbb_cccc_ddddeeeeffff.slice/cri-containerd-" +
      kCidB + ".scope");
  Worker wa(a, 40);
  Worker wb(b, 24);
  Worker ws(sandbox, 0);
  ASSERT_TRUE(wa.Ready());
  ASSERT_TRUE(wb.Ready());
  ASSERT_TRUE(ws.Ready());

  // The fake NVML: GPU-aaaa lists pod A's process (1 GiB); GPU-bbbb lists none (its processes
  // in a PID namespace NVML does not see) but has 3 GiB used.
  const std::string nvml_script = t.path() + "/nvml.txt";
  std::ofstream(nvml_script)
      << "gpu 0 uuid=GPU-aaaa name=NVIDIA H100 bus=00000000:3B:00.0 util=80 used=2147483648 "
         "total=85899345920\n"
      << "gpu 1 uuid=GPU-bbbb name=NVIDIA H100 bus=00000000:5E:00.0 util=40 used=3221225472 "
         "total=85899345920\n"
      << "proc 0 pid=" << wa.pid() << " used=1073741824\n";
  ::setenv("RIGHTSIZE_FAKE_NVML", nvml_script.c_str(), 1);
  auto gpu = OpenNvml(FAKE_NVML_PATH);
  ASSERT_TRUE(gpu->available()) << gpu->status();

  json limits_a = {{"limits", {{"cpu", "1"}, {"memory", "256Mi"}, {"nvidia.com/gpu", "1"}}}};
  json pod_a = PodJson("ml", "train-x7k2p", kUidA, "Burstable", "Job", "train", "trainer", kCidA,
                       limits_a, Running());
  json pod_b = PodJson("web", "api-7d4b9c8f6d-q2w3e", kUidB, "BestEffort", "ReplicaSet",
                       "api-7d4b9c8f6d", "server", kCidB, json::object(), Running());
  kubelet.SetPods({pod_a, pod_b});
  v1::ListPodResourcesResponse devices;
  for (auto [pod, ns, container, uuid] :
       {std::tuple{"train-x7k2p", "ml", "trainer", "GPU-aaaa"},
        std::tuple{"api-7d4b9c8f6d-q2w3e", "web", "server", "GPU-bbbb"}}) {
    v1::PodResources* p = devices.add_pod_resources();
    p->set_name(pod);
    p->set_namespace_(ns);
    v1::ContainerResources* c = p->add_containers();
    c->set_name(container);
    v1::ContainerDevices* d = c->add_devices();
    d->set_resource_name("nvidia.com/gpu");
    d->add_device_ids(uuid);
  }
  kubelet.resources().Set(devices);

  // As NodeAgent sets them up: stat and cgroup counter files kept open.
  ProcFs proc;
  proc.set_keep_stat_open(true);
  CgroupFs cgroups;
  cgroups.set_keep_open(true);
  ASSERT_TRUE(cgroups.keeps_open());
  Kubelet k(kubelet.Options());
  AgentOptions options;
  options.cluster = "k8s-test";
  options.kubernetes = true;
  options.pod_logs_dir = t.path() + "/pods";
  Agent agent(&proc, &cgroups, gpu.get(), options);
  agent.set_kubelet(&k);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(agent.Cycle(i, 1000 + i).empty());
  EXPECT_EQ(agent.kubelet_error(), "");
  std::string metrics = agent.Metrics();
  EXPECT_NE(metrics.find("rightsize_job_gpu_memory_bytes{job_id=\"ml/train-x7k2p/trainer\","
                         "kind=\"kubernetes\"} 1073741824"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("rightsize_job_gpu_memory_bytes{job_id=\"web/api-7d4b9c8f6d-q2w3e/"
                         "server\",kind=\"kubernetes\"} 3221225472"),
            std::string::npos)
      << metrics;
  EXPECT_NE(metrics.find("rightsize_job_processes{job_id=\"ml/train-x7k2p/trainer\","
                         "kind=\"kubernetes\"} 1"),
            std::string::npos)
      << metrics;
  // A process that joins is counted at the next cycle, whether or not the container's full
  // reading is due (two cycles in a row: at most one of them is).
  Worker wa2(a, 0);
  ASSERT_TRUE(wa2.Ready());
  EXPECT_TRUE(agent.Cycle(3, 1003).empty());
  EXPECT_NE(agent.Metrics().find("rightsize_job_processes{job_id=\"ml/train-x7k2p/trainer\","
                                 "kind=\"kubernetes\"} 2"),
            std::string::npos)
      << agent.Metrics();
  Worker wa3(a, 0);
  ASSERT_TRUE(wa3.Ready());
  EXPECT_TRUE(agent.Cycle(4, 1004).empty());
  EXPECT_NE(agent.Metrics().find("rightsize_job_processes{job_id=\"ml/train-x7k2p/trainer\","
                                 "kind=\"kubernetes\"} 3"),
            std::string::npos)
      << agent.Metrics();
  EXPECT_EQ(WEXITSTATUS(wa2.Finish()), 0);
  EXPECT_EQ(WEXITSTATUS(wa3.Finish()), 0);

  // Pod A completes: its process exits, the kubelet says so, the cgroup stays a while.
  EXPECT_EQ(WEXITSTATUS(wa.Finish()), 0);
  const int64_t peak_a = ReadInt(a.Dir("memory") + "/memory.max_usage_in_bytes");
  pod_a["status"]["containerStatuses"][0]["state"] = Terminated(0, "Completed");
  kubelet.SetPods({pod_a, pod_b});
  std::vector<JobRecord> ended;
  for (int i = 5; i < 8 && ended.empty(); ++i) ended = agent.Cycle(i, 1000 + i);
  ASSERT_EQ(ended.size(), 1u);
  const JobRecord& ra = ended[0];
  EXPECT_EQ(ra.job_id, "ml/train-x7k2p/trainer");
  EXPECT_EQ(ra.cluster, "k8s-test");
  EXPECT_EQ(ra.source, "kubernetes");
  EXPECT_EQ(ra.request.user, "ml");
  EXPECT_EQ(ra.request.job_name, "train/trainer");
  EXPECT_EQ(ra.request.qos, "Burstable");
  EXPECT_EQ(ra.request.memory_bytes, 256 << 20);
  EXPECT_EQ(ra.request.gpus, 1);
  EXPECT_EQ(ra.outcome.state, "COMPLETED");
  EXPECT_EQ(ra.outcome.exit_code, 0);
  ASSERT_TRUE(ra.usage.peak_rss_bytes.has_value());
  EXPECT_GE(peak_a, 40 << 20);
  EXPECT_NEAR(static_cast<double>(*ra.usage.peak_rss_bytes), static_cast<double>(peak_a),
              0.05 * static_cast<double>(peak_a));
  EXPECT_EQ(ra.usage.peak_gpu_memory_bytes, 1073741824);
  a.Remove();  // the runtime removes it; the agent must not record it twice
  EXPECT_TRUE(agent.Cycle(8, 1008).empty());

  // Pod B's cgroup goes first; the kubelet reports the end a cycle later.
  EXPECT_EQ(WEXITSTATUS(wb.Finish()), 0);
  const int64_t peak_b = ReadInt(b.Dir("memory") + "/memory.max_usage_in_bytes");
  b.Remove();
  EXPECT_TRUE(agent.Cycle(9, 1009).empty());  // waiting for the kubelet's word
  pod_b["status"]["containerStatuses"][0]["state"] = Terminated(0, "Completed");
  kubelet.SetPods({pod_a, pod_b});
  ended = agent.Cycle(10, 1010);
  ASSERT_EQ(ended.size(), 1u);
  EXPECT_EQ(ended[0].job_id, "web/api-7d4b9c8f6d-q2w3e/server");
  EXPECT_EQ(ended[0].request.job_name, "api/server");
  EXPECT_EQ(ended[0].request.qos, "BestEffort");
  EXPECT_EQ(ended[0].outcome.state, "COMPLETED");
  EXPECT_NEAR(static_cast<double>(*ended[0].usage.peak_rss_bytes), static_cast<double>(peak_b),
              0.05 * static_cast<double>(peak_b));
  EXPECT_EQ(ended[0].usage.peak_gpu_memory_bytes, 3221225472);

  // The sandbox is never named: dropped after kUnnamedGiveUpS, never recorded.
  EXPECT_TRUE(agent.Cycle(10 + Agent::kUnnamedGiveUpS, 1040).empty());
  EXPECT_NE(agent.Metrics().find("rightsize_agent_unnamed_containers_total 1"), std::string::npos)
      << agent.Metrics();
  EXPECT_EQ(agent.jobs(), 0u);
  ::unsetenv("RIGHTSIZE_FAKE_NVML");
}

TEST(KubeAgentTest, RealOomKillIsOutOfMemoryAndAFailedPodIsDiagnosedFromItsLog) {
  ASSERT_TRUE(CanMakeCgroups()) << "needs root and cgroup v1 memory/cpuacct (make test runs so)";
  TempDir t;
  FakeKubelet kubelet(t.path());
  RealCgroup oom(std::string("/kubepods/burstable/pod") + kUidC + "/" + kCidC);
  // As runc sets a 32 MiB limit: memory and memory+swap (so memory.failcnt stays 0).
  std::ofstream(oom.Dir("memory") + "/memory.limit_in_bytes") << (32 << 20);
  if (fs::exists(oom.Dir("memory") + "/memory.memsw.limit_in_bytes")) {
    std::ofstream(oom.Dir("memory") + "/memory.memsw.limit_in_bytes") << (32 << 20);
  }
  RealCgroup failing(std::string("/kubepods/besteffort/pod") + kUidD + "/" + kCidD);
  Worker w_oom(oom, 0);  // ready at once; the allocation comes in a second worker step below
  ASSERT_TRUE(w_oom.Ready());
  Worker w_fail(failing, 8, 1);
  ASSERT_TRUE(w_fail.Ready());

  json pod_a = PodJson("ml", "big-abcde", kUidC, "Burstable", "Job", "big", "main", kCidC,
                       {{"limits", {{"memory", "32Mi"}}}}, Running());
  json pod_b = PodJson("ml", "bad-fghij", kUidD, "BestEffort", "Job", "bad", "main", kCidD,
                       json::object(), Running());
  kubelet.SetPods({pod_a, pod_b});
  // The failing pod's log: CRI lines, a partial one, the error at the end.
  const std::string logs = t.path() + "/pods";
  const std::string dir_b = logs + "/ml_bad-fghij_" + std::string(kUidD) + "/main";
  fs::create_directories(dir_b);
  std::ofstream(dir_b + "/0.log")
      << "2026-01-01T00:00:00.000000001Z stdout F loading data\n"
      << "2026-01-01T00:00:01.000000001Z stderr F Traceback (most recent call last):\n"
      << "2026-01-01T00:00:01.000000002Z stderr F   File \"/app/train.py\", line 3, in <module>\n"
      << "2026-01-01T00:00:01.000000003Z stderr P ModuleNotFoundError: No module "
      << "\n2026-01-01T00:00:01.000000004Z stderr F named 'torchvision'\n";

  ProcFs proc;
  proc.set_keep_stat_open(true);
  CgroupFs cgroups;
  cgroups.set_keep_open(true);
  Kubelet k(kubelet.Options());
  AgentOptions options;
  options.cluster = "k8s-test";
  options.kubernetes = true;
  options.pod_logs_dir = logs;
  options.ship = true;  // as in the DaemonSet: records and diagnoses go to the server
  Agent agent(&proc, &cgroups, nullptr, options);
  agent.set_kubelet(&k);
  EXPECT_TRUE(agent.Cycle(0, 1000).empty());

  // A real OOM kill: a process in the 32 MiB cgroup asks for 64 MiB.
  {
    Worker hog(oom, 64);
    EXPECT_FALSE(hog.Ready());
    int status = hog.Wait();
    ASSERT_TRUE(WIFSIGNALED(status));
    EXPECT_EQ(WTERMSIG(status), SIGKILL);
  }
  EXPECT_EQ(WEXITSTATUS(w_oom.Finish()), 0);
  EXPECT_EQ(WEXITSTATUS(w_fail.Finish()), 1);
  // The kubelet reports a plain error for the first (exit 137 after its main process was
  // killed): the OOM kill must come from the cgroup's memory.oom_control.
  pod_a["status"]["containerStatuses"][0]["state"] = Terminated(137, "Error");
  pod_b["status"]["containerStatuses"][0]["state"] = Terminated(1, "Error");
  kubelet.SetPods({pod_a, pod_b});
  std::vector<JobRecord> ended = agent.Cycle(1, 1001);
  ASSERT_EQ(ended.size(), 2u);
  std::map<std::string, JobRecord> by_id;
  for (auto& r : ended) by_id[r.job_id] = r;
  ASSERT_TRUE(by_id.count("ml/big-abcde/main"));
  EXPECT_EQ(by_id["ml/big-abcde/main"].outcome.state, "OUT_OF_MEMORY");
  EXPECT_EQ(by_id["ml/big-abcde/main"].outcome.exit_code, 137);
  EXPECT_EQ(by_id["ml/big-abcde/main"].outcome.signal, 9);
  ASSERT_TRUE(by_id.count("ml/bad-fghij/main"));
  EXPECT_EQ(by_id["ml/bad-fghij/main"].outcome.state, "FAILED");
  EXPECT_EQ(by_id["ml/bad-fghij/main"].outcome.exit_code, 1);

  std::vector<DiagnosedRecord> diagnosed = agent.TakeDiagnoses();
  ASSERT_EQ(diagnosed.size(), 2u);
  std::map<std::string, Diagnosis> diag;
  for (auto& d : diagnosed) diag[d.job.job_id] = d.diagnosis;
  EXPECT_EQ(FailureClassName(diag["ml/big-abcde/main"].cls), "host_oom")
      << diag["ml/big-abcde/main"].summary;
  EXPECT_EQ(FailureClassName(diag["ml/bad-fghij/main"].cls), "import_error")
      << diag["ml/bad-fghij/main"].summary;
  // The partial line was joined before the diagnosis read it.
  std::string evidence;
  for (const auto& e : diag["ml/bad-fghij/main"].evidence) evidence += e.text + "\n";
  EXPECT_NE(evidence.find("No module named 'torchvision'"), std::string::npos) << evidence;

  // The server cannot read the node's logs: the diagnosis is shipped with the record.
  std::map<std::string, JobTelemetry> shipped;
  for (auto& t : agent.TakeTelemetry()) shipped[t.job.job_id] = t;
  ASSERT_TRUE(shipped.count("ml/bad-fghij/main"));
  ASSERT_TRUE(shipped["ml/bad-fghij/main"].diagnosis.has_value());
  EXPECT_EQ(shipped["ml/bad-fghij/main"].diagnosis->cls, "import_error");
  json batch = TelemetryBatchJson("node-1", 1, {shipped["ml/bad-fghij/main"]});
  EXPECT_EQ(batch["jobs"][0]["diagnosis"]["class"], "import_error");
  EXPECT_EQ(batch["jobs"][0]["diagnosis"]["schema"], "rightsize.diagnosis/v1");
}

TEST(KubeAgentTest, KeptCgroupFilesNeverReadARemovedCgroup) {
  ASSERT_TRUE(CanMakeCgroups()) << "needs root and cgroup v1 memory/cpuacct (make test runs so)";
  const std::string rel = std::string("/kubepods/burstable/pod") + kUidE + "/" + kCidE;
  CgroupFs cgroups;
  cgroups.set_keep_open(true);
  ASSERT_TRUE(cgroups.keeps_open());  // /sys/fs/cgroup is a cgroup file system
  auto first = std::make_unique<RealCgroup>(rel);
  {
    Worker w(*first, 8);
    ASSERT_TRUE(w.Ready());
    auto c = cgroups.Read(rel);  // every counter file, opened and kept
    ASSERT_TRUE(c.has_value());
    EXPECT_GE(c->memory_bytes.value_or(0), 8 << 20);
    EXPECT_EQ(cgroups.Tasks(rel), 1);
    // cgroup.procs is read afresh: a process that joined a moment ago is listed (a kept v1
    // file would give the list the kernel cached at the last read).
    EXPECT_EQ(cgroups.Procs(rel), std::vector<int64_t>{w.pid()});
    Worker joined(*first, 0);
    ASSERT_TRUE(joined.Ready());
    EXPECT_EQ(cgroups.Procs(rel).size(), 2u);
    EXPECT_EQ(cgroups.Tasks(rel), 2);
    EXPECT_EQ(WEXITSTATUS(w.Finish()), 0);
    EXPECT_EQ(WEXITSTATUS(joined.Finish()), 0);
  }
  // Removed and made again under the same path between two reads: the kept files are the old
  // cgroup's, and the reads must be the new one's.
  first.reset();
  RealCgroup second(rel);
  Worker w(second, 24);
  ASSERT_TRUE(w.Ready());
  // The worker still runs, so its CPU counter moves: the read must fall between the new
  // cgroup's counter just before and just after it.
  const double cpu_before = ReadInt(second.Dir("cpuacct") + "/cpuacct.usage") / 1e9;
  auto c = cgroups.Read(rel);
  const double cpu_after = ReadInt(second.Dir("cpuacct") + "/cpuacct.usage") / 1e9;
  ASSERT_TRUE(c.has_value());
  EXPECT_GE(c->memory_bytes.value_or(0), 24 << 20);
  EXPECT_EQ(c->memory_peak_bytes, ReadInt(second.Dir("memory") + "/memory.max_usage_in_bytes"));
  EXPECT_GE(c->cpu_s, cpu_before);
  EXPECT_LE(c->cpu_s, cpu_after);
  EXPECT_EQ(cgroups.Tasks(rel), 1);
  // Removed for good: gone, not the last values read.
  EXPECT_EQ(WEXITSTATUS(w.Finish()), 0);
  second.Remove();
  EXPECT_FALSE(cgroups.Read(rel, false).has_value());
  EXPECT_FALSE(cgroups.Read(rel).has_value());
  EXPECT_FALSE(cgroups.Tasks(rel).has_value());
  EXPECT_TRUE(cgroups.Procs(rel).empty());
}

}  // namespace
}  // namespace rightsize
