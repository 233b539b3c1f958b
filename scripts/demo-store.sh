#!/usr/bin/env bash
# The demo's store, built one way for `make demo` (scripts/demo.sh) and for the browser test of
# its pages (test/web/demo_test.sh): real accounting with measured usage, all bundled in data/.
#   alex, fritz  NHR@FAU's GPU cluster Alex and CPU cluster Fritz, 544 jobs of 2023-02-07..10
#                (ClusterCockpit job table, data/usage/SOURCES.md)
#   habrok       100 jobs of Hábrók (Groningen), a sacct export of 2023-05..2024-04
#   HPC2N        the HPC2N CPU trace excerpt of 2002 (SWF, data/traces/SOURCES.md)
# then trains the prediction models on them. Usage: scripts/demo-store.sh RIGHTSIZE STORE
# STORE is an SQLite file (made anew) or a postgresql:// (postgres://) URL of a PostgreSQL
# database: nothing is deleted there; ingesting again replaces the same jobs, never duplicates.
set -euo pipefail
RS=$1
DB=$2
SRC=$(cd "$(dirname "$0")/.." && pwd)
case "$DB" in
  postgresql://* | postgres://*) ;;
  *)
    rm -f "$DB" "$DB-wal" "$DB-shm"
    mkdir -p "$(dirname "$DB")"
    ;;
esac
rs() { "$RS" --db "$DB" "$@"; }

echo "== rightsize ingest clustercockpit (FAU Alex GPU + Fritz CPU clusters, Feb 2023)"
rs ingest clustercockpit "$SRC/data/usage/clustercockpit/fau-alex-fritz-2023-02_jobs.csv.gz"
echo "== rightsize ingest sacct (Hábrók, a sacct export of 2023-24)"
rs ingest sacct --cluster habrok --delimiter ☃ --columns \
  JobID,JobName,User,Partition,NodeList,NNodes,NCPUs,NTasks,State,Submit,Start,End,Timelimit,Elapsed,TotalCPU,CPUTime,UserCPU,SystemCPU,ReqMem,MaxRSS,MaxVMSize,ReqTRES,AllocTRES,TRESUsageInMax,TRESUsageInTot,TRESUsageOutTot,MaxDiskRead,MaxDiskWrite,MaxRSSNode,MaxRSSTask,MaxVMSizeNode,MaxVMSizeTask,MaxDiskReadNode,MaxDiskReadTask,MaxDiskWriteNode,MaxDiskWriteTask,Comment \
  "$SRC/data/usage/slurm/07_slurm23-habrok-groningen_sacct-snowman-delim_100jobs_gpumem-gpuutil.txt.gz"
echo "== rightsize ingest swf (HPC2N CPU trace, 2002)"
rs ingest swf "$SRC/data/traces/HPC2N-excerpt-alea.swf.gz" --cluster HPC2N
echo "== rightsize train (prediction models from the same history)"
rs train
