#!/usr/bin/env python3
"""A past for the SLURM end-to-end tests: N finished runs of one job, as `sacct -P` prints them.

Usage: make_history.py CLUSTER USER JOB_NAME N PEAK_MIB CORES RUNTIME_S > history.psv

Each run asked for 2 GiB, 2 CPUs and one hour, and used about PEAK_MIB of memory, CORES cores
and RUNTIME_S seconds (a few percent of noise), ending over the last N hours. Around them, 4 N
runs of other users' jobs with other sizes and requests, so that `rightsize train` has a
cluster's worth of variety to learn from (a model fitted to one job alone has nothing to learn).
"""
import random
import sys
import time

cluster, user, name = sys.argv[1:4]
n, peak_mib, cores, runtime_s = int(sys.argv[4]), float(sys.argv[5]), float(sys.argv[6]), int(sys.argv[7])
random.seed(7)
fmt = "%Y-%m-%dT%H:%M:%S"
cols = ("JobID,JobIDRaw,Cluster,Partition,Account,User,Group,QOS,JobName,State,ExitCode,Submit,"
        "Start,End,Elapsed,Timelimit,NNodes,NCPUS,ReqCPUS,ReqMem,ReqTRES,AllocTRES,TotalCPU,"
        "MaxRSS,AveRSS,NTasks,TRESUsageInMax,TRESUsageInTot,TRESUsageOutTot,NodeList").split(",")
print("|".join(cols))
now = int(time.time())
hms = lambda s: "%02d:%02d:%02d" % (s // 3600, (s % 3600) // 60, s % 60)
# (user, job name, peak MiB, cores, runtime s, requested MiB, CPUs, time limit min)
kinds = [(user, name, peak_mib, cores, runtime_s, 2048, 2, 60)]
for k in range(8):
    # the same habits as the job's: about 15% of the memory and a tenth of the time asked for
    req_mib = 512 * 2 ** (k % 4 + 1)
    kinds.append(("user%d" % (k % 4), "other%d" % k, req_mib * peak_mib / 2048, 1 + k % 2,
                  30 * (k + 1), req_mib, 1 + k % 2 + (k % 3 == 0), 5 * (k + 2)))
jobs = [kinds[0]] * n + [kinds[1 + i % 8] for i in range(4 * n)]
random.shuffle(jobs)
for i, (u, jname, pk, cr, rt, req_mib, cpus, tl_min) in enumerate(jobs):
    job_id = str(900000 + i)
    end = now - (len(jobs) - i) * 600
    elapsed = max(1, int(rt * random.uniform(0.9, 1.1)))
    start = end - elapsed
    peak_k = int(pk * 1024 * random.uniform(0.95, 1.05))
    cpu_s = elapsed * min(cr, cpus) * random.uniform(0.95, 1.0)
    total_cpu = "%02d:%02d:%06.3f" % (cpu_s // 3600, (cpu_s % 3600) // 60, cpu_s % 60)
    req = "%dM" % req_mib
    job = dict(JobID=job_id, JobIDRaw=job_id, Cluster=cluster, Partition="debug",
               Account="testacct", User=u, Group=u, QOS="normal", JobName=jname,
               State="COMPLETED", ExitCode="0:0", Submit=time.strftime(fmt, time.localtime(start - 5)),
               Start=time.strftime(fmt, time.localtime(start)),
               End=time.strftime(fmt, time.localtime(end)), Elapsed=hms(elapsed),
               Timelimit=hms(tl_min * 60), NNodes="1", NCPUS=str(cpus), ReqCPUS=str(cpus),
               ReqMem=req, ReqTRES="billing=%d,cpu=%d,mem=%s,node=1" % (cpus, cpus, req),
               AllocTRES="billing=%d,cpu=%d,mem=%s,node=1" % (cpus, cpus, req),
               TotalCPU=total_cpu, MaxRSS="", AveRSS="", NTasks="", TRESUsageInMax="",
               TRESUsageInTot="", TRESUsageOutTot="", NodeList="node1")
    batch = dict(job, JobID=job_id + ".batch", JobName="batch", User="", MaxRSS="%dK" % peak_k,
                 AveRSS="%dK" % (peak_k // 2), NTasks="1", ReqTRES="",
                 AllocTRES="cpu=%d,mem=%s,node=1" % (cpus, req))
    for rec in (job, batch):
        print("|".join(rec[c] for c in cols))
