#include "predict/cluster.h"

#include <fmt/format.h>

#include <algorithm>
#include <memory>

#include "ingest/clustercockpit.h"
#include "ingest/ingest.h"
#include "ingest/sacct.h"
#include "ingest/sinfo.h"
#include "ingest/swf.h"

namespace rightsize {

ClusterContext ContextFor(Store& store, const std::string& cluster) {
  ClusterContext c;
  auto meta = store.GetClusterMeta(cluster);
  if (meta.ok()) {
    for (const char* key : {"swf.MaxProcs", "cpus"}) {
      auto it = meta->find(key);
      if (it == meta->end()) continue;
      if (auto v = ParseDouble(it->second); v && *v > 0) c.total_cpus = *v;
    }
    for (const PartitionShape& p : PartitionsFromMeta(*meta)) {
      c.partitions[p.name] = NodeShape{p.cpus_per_node, static_cast<double>(p.memory_per_node),
                                       static_cast<double>(p.gpus_per_node), p.gpu_type};
      if (p.is_default) c.default_partition = p.name;
    }
  }
  return c;
}

StatusOr<std::vector<JobRecord>> LoadJobs(Store& store, const std::string& cluster) {
  std::vector<JobRecord> jobs;
  JobFilter f;
  f.cluster = cluster;
  RS_RETURN_IF_ERROR(store.ScanJobs(f, [&](const JobRecord& j) {
    jobs.push_back(j);
    return true;
  }));
  return jobs;
}

StatusOr<std::string> PickCluster(Store& store, const std::string& given) {
  RS_ASSIGN_OR_RETURN(auto clusters, store.Clusters());
  if (!given.empty()) {
    if (std::find(clusters.begin(), clusters.end(), given) != clusters.end()) return given;
    return Status::NotFound(
        fmt::format("no jobs of cluster {} (clusters with jobs: {})", given,
                    clusters.empty() ? "none" : fmt::format("{}", fmt::join(clusters, ", "))));
  }
  if (clusters.size() == 1) return clusters[0];
  if (clusters.empty()) {
    return Status::NotFound("the store has no jobs: ingest accounting first (rightsize ingest)");
  }
  return Status::InvalidArgument(
      fmt::format("the store holds {} clusters ({}): pick one with --cluster", clusters.size(),
                  fmt::join(clusters, ", ")));
}

StatusOr<LoadedTrace> LoadTrace(const std::string& path, std::string format,
                                const std::string& cluster) {
  if (format.empty() || format == "auto") {
    if (path.find(".swf") != std::string::npos) {
      format = "swf";
    } else if (path.find(".csv") != std::string::npos) {
      format = "clustercockpit";
    } else {
      format = "sacct";
    }
  }
  std::unique_ptr<RecordParser> parser;
  if (format == "swf") {
    parser = std::make_unique<SwfParser>();
  } else if (format == "sacct") {
    parser = std::make_unique<SacctParser>(SacctOptions{});
  } else if (format == "clustercockpit") {
    parser = std::make_unique<ClusterCockpitParser>();
  } else {
    return Status::InvalidArgument(
        fmt::format("--format: expected swf, sacct or clustercockpit, got {}", Quote(format)));
  }
  RS_ASSIGN_OR_RETURN(auto store, OpenStore(":memory:"));
  IngestOptions options;  // records that name their cluster keep it (`cluster` picks one)
  IngestStats stats;
  RS_RETURN_IF_ERROR(IngestFile(path, *parser, *store, "trace", options, &stats));
  LoadedTrace out;
  if (stats.skipped > 0) {
    out.skipped_note =
        fmt::format("{}: {} malformed lines skipped (first: {})", path, stats.skipped,
                    stats.errors.empty() ? "" : stats.errors[0].ToString());
  }
  RS_ASSIGN_OR_RETURN(std::string picked, PickCluster(*store, cluster));
  RS_ASSIGN_OR_RETURN(out.jobs, LoadJobs(*store, picked));
  out.context = ContextFor(*store, picked);
  return out;
}

}  // namespace rightsize
