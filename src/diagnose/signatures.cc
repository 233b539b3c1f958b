#include "diagnose/signatures.h"

#include <array>

namespace rightsize {
namespace {

using C = FailureClass;
using K = SignatureKind;

// Sizes as printed by the frameworks: "2.00 GiB", "20.00 MiB", "512 bytes".
#define RS_SIZE R"re([0-9][0-9.]*\s?(?:[KMGTP]i?B|bytes|[KMGTP]))re"
// An exit code as schedulers, shells and workflow managers print it, up to the number: "exit
// code 140", "Exited with exit code 127", "exit status (140)", "exitCode": 50001.
#define RS_EXIT R"re((?i)\bexit(?:ed with)?(?:_| )?(?:code|status)"?[:= ]+\(?)re"

// Ordered by class; within a class the most specific first (the first match names the fact).
// The table is data, one row per wording family: clang-format would re-wrap it differently on
// every run, so it is left as written.
// clang-format off
constexpr Signature
    kSignatures[] =
        {
            // ---- GPU out of memory
            // -----------------------------------------------------------------
            {"pytorch_cuda_oom", C::kGpuOom, K::kCause, 0.97,
             R"re(CUDA out of memory\.? *Tried to allocate)re",
             R"re(Tried to allocate (?P<tried>)re" RS_SIZE
             R"re()(?:.*?\(?GPU (?P<gpu>\d+)(?:; | has a total capacity of )(?P<capacity>)re" RS_SIZE
             R"re())?(?:.*?(?P<allocated>)re" RS_SIZE
             R"re() already allocated)?(?:.*?of which (?P<free>)re" RS_SIZE
             R"re() is free)?(?:.*?(?P<free_pt1>)re" RS_SIZE
             R"re() free;)?(?:.*?this process has (?P<in_use>)re" RS_SIZE
             R"re() memory in use)?(?:.*?(?P<allocated_pt2>)re" RS_SIZE
             R"re() is allocated by PyTorch)?(?:.*?(?P<reserved_unallocated>)re" RS_SIZE
             R"re() is reserved by PyTorch but unallocated)?(?:.*?(?P<reserved>)re" RS_SIZE
             R"re() reserved in total by PyTorch)?)re"},
            {"pytorch_oom_error", C::kGpuOom, K::kCause, 0.95,
             R"re(torch\.(?:cuda\.)?OutOfMemoryError)re", ""},
            {"cuda_oom", C::kGpuOom, K::kCause, 0.9,
             R"re(CUDA error: out of memory|cudaErrorMemoryAllocation|CUDA_ERROR_OUT_OF_MEMORY|CUDA out of memory)re",
             ""},
            {"tensorflow_oom", C::kGpuOom, K::kCause, 0.95,
             R"re(OOM when allocating tensor|ran out of memory trying to allocate)re",
             R"re((?:shape\s?\[(?P<shape>[^\]]*)\])?(?:.*?trying to allocate (?P<tried>)re" RS_SIZE
             R"re())?)re", true},
            // TensorFlow raises it for a full disk too: weak alone.
            {"tensorflow_resource_exhausted", C::kGpuOom, K::kCause, 0.6,
             R"re(ResourceExhaustedError(?:$|[^:]|:\s*$|: [^/\s]+(?:\s|$)))re", ""},
            {"xla_oom", C::kGpuOom, K::kCause, 0.95,
             R"re((?i:RESOURCE_EXHAUSTED|Resource exhausted): (?:Out of memory|Failed to allocate|Out\s*$)|(?:^|Out )of memory while trying to allocate)re",
             R"re(allocate (?P<tried>)re" RS_SIZE R"re())re"},
            {"cublas_alloc_failed", C::kGpuOom, K::kCause, 0.8,
             R"re(CUBLAS_STATUS_ALLOC_FAILED|CUDNN_STATUS_ALLOC_FAILED|CUFFT_ALLOC_FAILED)re",
             ""},
            {"gpu_fragmentation_hint", C::kGpuOom, K::kCause, 0.5,
             R"re(reserved but unallocated memory is large|If reserved memory is >> allocated memory)re",
             ""},
            // Every other framework's way of saying the device memory ran out, old and new: Lua
            // Torch and THC-era PyTorch ("THCudaCheck FAIL … error=2 : out of memory"), Caffe
            // ("Check failed: error == cudaSuccess (2 vs. 0)  out of memory"), Theano/CNMeM,
            // C++ extensions ("cuda failed with error 2 out of memory"); Julia CUDA.jl
            // ("Out of GPU memory trying to allocate"), PaddlePaddle ("Out of memory error on
            // GPU 2. Cannot allocate …"), MATLAB ("Out of memory on device"), MXNet and Kokkos
            // (cudaMalloc failed), CuPy and Chainer on it ("out of memory to allocate N bytes
            // (total M bytes)", "Out of memory allocating N bytes (allocated so far: M bytes)"),
            // ROCm/HIP, vLLM's KV cache, the CUDA samples' check macro ("GPUassert: out of
            // memory").
            {"gpu_oom_other", C::kGpuOom, K::kCause, 0.93,
             R"re((?i)out of (?:gpu|device|video) memory|out of memory (?:error )?on (?:gpu|device)|(?:gpu|device|hip|xpu|cuda) out of memory|OutOfGPUMemoryError|cannot allocate \S+ (?:memory )?on (?:gpu|device)|cudaMalloc\w* (?:retry )?failed: out of memory|cupy\.cuda\.memory\.OutOfMemoryError|hipErrorOutOfMemory|No available memory for the cache blocks|failed to allocate \S+ (?:\S+ )?(?:on|from) (?:gpu|device)|CNMEM_STATUS_OUT_OF_MEMORY|of device memory \(out of memory\)|cuMemAlloc\w* failed|\bcuda\w*\b.{0,80}\bout of memory|\bgpu\w*(?:assert|check|error)\w*:? out of memory|out of memory (?:to allocate|allocating) [\d,]+ bytes \((?:total|allocated so far))re",
             R"re((?i)(?:trying to allocate|cannot allocate|tried to allocate|allocating|failed to allocate|memory to allocate) (?P<tried>)re" RS_SIZE
             R"re())re"},

            // Device allocators that name no device in their words: MindSpore on GPU and Ascend
            // ("Allocate output memory failed", "Device(id:0) memory isn't enough and alloc
            // failed", its pool's "Memory not enough: current free memory size[0] is smaller than
            // required size"), Paddle's and OneFlow's device allocators.
            {"device_alloc_failed_other", C::kGpuOom, K::kCause, 0.85,
             R"re(Allocate (?:output |workspace |static |dynamic |continuous )?memory failed|memory isn't enough and alloc failed|Memory not enough: current free memory size|(?i:device|gpu|npu) memory (?:is )?(?:not enough|exhausted|insufficient))re",
             R"re(required size\[(?P<tried>\d+)\])re"},

            // ---- host out of memory
            // ----------------------------------------------------------------
            {"slurm_oom_kill", C::kHostOom, K::kCause, 0.97,
             R"re(Detected \d+ oom[-_]kill events?)re",
             R"re(Detected (?P<oom_kills>\d+) oom[-_]kill events?(?:\(s\))? in (?:step |StepId=)?(?P<step>[\w.+]+?)\.?(?:\s|$))re"},
            {"slurm_exceeded_memory", C::kHostOom, K::kCause, 0.97,
             R"re(exceeded (?:job )?memory limit)re",
             R"re((?:(?P<step_id>StepId=)\S+ )?exceeded (?:job )?memory limit \((?P<used_raw>\d+) > (?P<limit_raw>\d+)\))re"},
            {"srun_task_oom", C::kHostOom, K::kCause, 0.95, R"re(task \d+: Out Of Memory)re",
             ""},
            {"kernel_oom_killer", C::kHostOom, K::kCause, 0.9,
             R"re((?:Memory cgroup out of memory|Out of memory): Kill(?:ed)? process|invoked oom-killer|oom-kill:constraint=|Killed process \d+ \(\S+\) total-vm)re",
             R"re(Kill(?:ed)? process (?P<pid>\d+) \((?P<process>[^)]+)\))re"},
            {"k8s_oomkilled", C::kHostOom, K::kCause, 0.95, R"re(\bOOMKilled\b)re", ""},
            {"k8s_evicted_memory", C::kHostOom, K::kCause, 0.9,
             R"re(node was low on resource: memory|had condition: \[?MemoryPressure|\bMemoryPressure\s+True\b)re", ""},
            {"java_oom", C::kHostOom, K::kCause, 0.9,
             R"re(java\.lang\.OutOfMemoryError|Out of memory\. *$|out of memory allocating \d+ bytes)re",
             ""},
            {"slurm_state_oom", C::kHostOom, K::kCause, 0.9, R"re(\bOUT_OF_MEMORY\b)re", ""},
            {"numpy_memory_error", C::kHostOom, K::kCause, 0.9,
             R"re(_ArrayMemoryError|Unable to allocate [0-9.]+ [KMGTP]i?B for an array)re",
             R"re(Unable to allocate (?P<tried>)re" RS_SIZE R"re())re"},
            {"python_memory_error", C::kHostOom, K::kCause, 0.85,
             R"re((?:^|[\s:\]])MemoryError\b)re", ""},
            {"cpp_bad_alloc", C::kHostOom, K::kCause, 0.8, R"re(std::bad_alloc)re", ""},
            {"enomem", C::kHostOom, K::kCause, 0.6, R"re(Cannot allocate memory|\bENOMEM\b)re",
             ""},
            // The schedulers' and resource managers' own words for a job over its memory:
            // HTCondor holds, PBS/Torque ("job killed: mem job total N kb exceeded limit M kb",
            // "Job exceeded a memory resource limit (vmem, pvmem, etc.)") and LSF kills, Grid
            // Engine's execd ("exceeds job hard limit "h_vmem""), Ray's memory monitor, Dask's
            // nanny, YARN containers, Flux and Kubernetes.
            {"memory_limit_exceeded", C::kHostOom, K::kCause, 0.93,
             R"re((?i)(?:gone|went|is|was) over (?:its |the )?(?:cgroup )?memory (?:limit|request)|memory usage (?:\S+ )?exceeded|exceeded (?:its |the |their |a |allowed |requested |job )*memory|(?:exceeding|over) (?:the )?memory limits?|TERM_MEMLIMIT|job killed: [pv]?mem \d+\w* exceeded|job killed: [pv]*mem\b.{0,60}\bexceeded limit|exceeds? (?:job )?(?:hard|soft) limit "?[hs]_(?:vmem|rss|data)\b|killed due to memory pressure|running low on memory|exceeded \d+% memory budget|memory (?:limit|budget) (?:was )?(?:exceeded|reached)|ray\.exceptions\.OutOfMemoryError|\boom[-_ ]?kill(?:ed|er|s)?\b|killed by (?:the )?oom|\(OOM\))re",
             R"re((?i)memory limit of (?P<limit_mb>\d+) (?:megabytes|MB)|mem (?P<used_kb>\d+)kb exceeded limit (?:\d+kb|(?P<limit_kb>\d+)))re"},
            // Allocation failures as runtimes print them: R, Go, Julia, Fortran (forrtl 41),
            // MATLAB, LAMMPS, GROMACS, C, PyTorch's CPU allocator ("DefaultCPUAllocator: not
            // enough memory: you tried to allocate").
            {"host_alloc_failed", C::kHostOom, K::kCause, 0.8,
             R"re(cannot allocate vector of size|fatal error: runtime: out of memory|insufficient virtual memory|OutOfMemoryError\(\)|[Oo]ut of memory\. Type|exceeds maximum array size preference|Not enough memory\b|[Ff]ailed to (?:allocate|malloc|calloc|realloc) \d+ (?:bytes|elements)|[Mm]emory allocation failed|malloc failed|[Uu]nable to allocate (?:memory|\d+ bytes)|CPUAllocator: (?:not enough memory|can't allocate memory)|posix_memalign\([^)]*\) == 0\. 12 vs 0|posix_memalign failed)re",
             R"re(vector of size (?P<tried>[0-9.]+ [KMG]b))re"},
            // A process killed by SIGKILL as the shell (job control "line 5: 1921 Killed cmd",
            // a bare "Killed", in the system's language too, or appended to the progress bar it
            // interrupted: "331/1063 [01:06<03:59, 3.06it/s]Killed"), srun, mpirun (its banner
            // wraps: "exited on\nsignal 9 (Killed)") and Hydra ("EXIT CODE: 9") report it, and
            // as programs report a child's SIGKILL: a negative exit code (Python's subprocess,
            // torch elastic's "exitcode: -9", "error code -9"), Python's "died with
            // <Signals.SIGKILL: 9>", Go's "signal: killed".
            // The kernel's OOM killer is what sends SIGKILL to a user's process unasked, so it
            // names host_oom on its own, but weakly (0.55): any stronger cause wins.
            {"killed_report", C::kHostOom, K::kCause, 0.55,
             R"re(line \d+: +\d+ (?:Killed|已杀死|已砍掉|Getötet|Processus arrêté|強制終了|Убито|Terminado \(killed\))(?:\s|$)|^\W{0,3}(?:Killed|已杀死|已砍掉|Getötet|Processus arrêté|強制終了|Убито)\W{0,3}$|\bsignal 9 \(Killed\)|killed by signal 9\b|task \d+: Killed\b|Killed \(signal 9\)|zsh: killed\b|^\[\d+\]\s+[+-]?\s*\d+ killed\b|\(exitcode: -9\)|(?:\]|\d|%)\s*Killed\W{0,3}$|EXIT CODE: 9\b|\bsignal: killed\b|died with <Signals\.SIGKILL: 9>|(?i:\b(?:exit|error|return)[ _]?(?:code|status)[:= ]+\(?-9\b|non-zero exit status -9\b))re",
             ""},
            {"killed_sigkill", C::kHostOom, K::kSymptom, 0.45,
             R"re(\bSIGKILL\b|\bsignal 9\b)re", ""},
            // 128 + SIGKILL, as shells, containers ("exitCode": 137), CI runners ("exit with status
            // code 137") and IDEs print it. A symptom: a time limit's SIGKILL and scancel end in
            // it too, so any other cause outranks it; alone in a log with no exception it names
            // host_oom weakly (0.55, the shell's "Killed" without the word).
            {"exit_137", C::kHostOom, K::kSymptom, 0.55,
             R"re((?i)\bexit(?:ed)?(?: with)?(?: (?:status|exit))?(?:_| )?(?:code|status)"?[:= ]+\(?137\b)re",
             ""},

            // ---- time limit
            // ------------------------------------------------------------------------
            {"slurm_time_limit", C::kTimeout, K::kCause, 0.99, R"re(DUE TO TIME LIMIT)re",
             R"re((?:JOB|STEP) (?P<step>[\w.+]+) ON (?P<node>\S+) CANCELLED AT (?P<at>\S+))re"},
            {"pbs_walltime", C::kTimeout, K::kCause, 0.95,
             R"re(walltime \d+ exceeded limit|TERM_RUNLIMIT|DeadlineExceeded|job killed: walltime)re",
             ""},
            {"slurm_state_timeout", C::kTimeout, K::kCause, 0.8,
             R"re(State=TIMEOUT|\bTIMEOUT\b.*\bTime ?limit|(?i:status|state)(?: is)?[:= ]+['"]?TIMEOUT\b|['"]TIMEOUT['"]|\bTIMEOUT +\d+:\d+\b)re", ""},
            // Every scheduler's way of saying the time ran out: Flux ("job.exception
            // type=timeout … resource allocation expired"), HTCondor ("exceeded allowed job
            // duration"), SGE (h_rt), PBS cput, LSF CPU limits, Kubernetes deadlines, Cobalt
            // and Moab wall-clock messages, ulimit -t (SIGXCPU).
            {"time_limit_exceeded", C::kTimeout, K::kCause, 0.93,
             R"re((?i)\b(?:wall[- ]?(?:clock[- ]?)?(?:time)?|run[- ]?time|cpu[- ]?time|time|job duration)[- ]limit (?:was |has been )?(?:exceeded|reached|expired|hit)\b|\bexceed(?:ed|s|ing) (?:its |the |their |allowed |maximum |max |hard |soft |requested |job |his |her |running |process )*(?:wall[- ]?(?:clock[- ]?)?(?:time)?|walltime|run[- ]?time|time[- ]?limit|(?:job )?duration|execution time|cpu[- ]?time)\b|resource allocation expired|\btype=timeout\b|TERM_(?:RUN|CPU)LIMIT|job killed: (?:walltime|cput)|active (?:on the node )?longer than (?:the )?specified deadline|execution took longer than \S+|No output has been received in the last \S+|reached (?:its |the )?(?:wall[- ]?(?:clock[- ]?)?(?:time)?|run[- ]?time|time)[- ]?limit|CPU time limit exceeded|\bcpu limit exceeded\b|exceeds? (?:job )?(?:hard|soft) limit "?[hs]_(?:rt|cpu)\b|(?-i:\b(?:[Dd]ue to|[Bb]ecause of|by|over) (?:the |its |a |their )?(?:job'?s? )?(?:[Ww]all[- ]?(?:[Cc]lock[- ]?)?(?:time)?|[Rr]un[- ]?time|time) limit\b)|enforced h_rt|\bh_rt\b.{0,30}\b(?:exceeded|limit reached))re", R"re((?i)duration of (?P<limit>[\d+:]+))re"},

            // Exit 140 = 128 + SIGUSR2, what LSF sends at TERM_RUNLIMIT and what Nextflow and
            // other workflow managers report for a task the scheduler stopped at its time limit.
            // Weak: a program may exit 140 by itself. Google Batch's reserved code 50005 is a
            // task over its maximum run duration.
            {"exit_140", C::kTimeout, K::kCause, 0.55,
             RS_EXIT R"re(140\b)re",
             ""},
            // A job, task or step that timed out as workflow managers and job libraries say it
            // (submitit's "this job is timed-out", "not requeued because: timed-out", Airflow's and
            // Celery's "Task … timed out"); not "has not timed out". Also CI services and job
            // runners: Azure Pipelines' "ran longer than the maximum time of 60 minutes", "failed
            // to finish within 60 seconds", AWS Batch's "Job attempt duration exceeded timeout".
            {"job_timed_out", C::kTimeout, K::kCause, 0.8,
             R"re((?i)\bnot requeued because: timed-out|\bthis job is timed-out\b|\b(?:job|task|step|allocation)(?: \S+)? (?:has |was |got )?timed[- ]out\b|\b(?:job|task|step|run|process|script|workflow|build|pipeline)s? (?:\S+ )?(?:failed to|did not|didn't|could not|couldn't) (?:finish|complete|terminate) (?:with)?in (?:the )?(?:\d+(?:\.\d+)? ?(?:s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|days?)\b|(?:allotted|allowed|given|maximum|max|requested) (?:time|duration|wall ?time))|\bran longer than (?:the )?maximum time\b|\bexceeded the maximum allowed time\b|\b(?:attempt|job|task|run) duration exceeded\b)re",
             ""},
            {"batch_exit_timeout", C::kTimeout, K::kCause, 0.85,
             RS_EXIT R"re(50005\b)re",
             ""},

            // ---- node failure
            // ----------------------------------------------------------------------
            {"slurm_node_failure", C::kNodeFailure, K::kCause, 0.97, R"re(DUE TO NODE FAIL)re",
             R"re(ON (?P<node>\S+) CANCELLED)re"},
            {"srun_node_failure", C::kNodeFailure, K::kCause, 0.9,
             R"re(Node failure on \S+|\bNODE_FAIL\b|requeued? (?:due to|because of) node failure)re",
             R"re(Node failure on (?P<node>[\w.-]+))re"},
            {"pbs_node_failure", C::kNodeFailure, K::kCause, 0.9,
             R"re(SISTER_EOF|requested job terminate|job killed: node \d+ \(\S+\))re",
             R"re(node \d+ \((?P<node>[^)]+)\))re"},
            {"node_not_responding", C::kNodeFailure, K::kCause, 0.7,
             R"re([Nn]odes? \S+ (?:not responding|are DOWN|is DOWN)|NodeNotReady|\bNodeLost\b|[Kk]ubelet stopped posting node status)re",
             R"re([Nn]odes? (?P<node>[\w.\[\],-]+) (?:not responding|are DOWN|is DOWN))re"},
            // A node or its daemon lost: Ray ("node … marked dead", "its node has died"),
            // HTCondor (reconnection failed, job lease expired), Open MPI/PRRTE ("lost
            // communication with a remote daemon"), LSF, Flux, Kubernetes, Spark masters that
            // stopped hearing a worker, sinfo listing nodes down and not responding.
            {"node_lost", C::kNodeFailure, K::kCause, 0.88,
             R"re((?i)has been marked (?:as )?dead|\bnode (?:was |is )?marked (?:as )?dead|\bits node (?:has )?died|NodeDiedError|\bnode (?:\S+ )?(?:has )?(?:died|crashed|went down|became unreachable|is unreachable)|lost (?:connection|contact|communication) (?:to|with) (?:the |a |its )?(?:node|host|(?:remote )?daemon|job shell|execution host|worker node|broker)|job reconnection failed|JobLeaseDuration.{0,40}expired|can ?not reconnect to|execution host (?:\S+ )?(?:became |is )?(?:unavailable|unreachable)|\bTERM_HOST\b|(?:ORTE|PRTE) daemon has unexpectedly failed|\bnode failure\b|type=node-failure|node\.kubernetes\.io/unreachable|no heartbeat (?:in|for) \d+|missed too many heartbeats|Removing (?:worker|executor) \S+ because|Lost executor \S+ on|_node_fail(?:ure)?\b|\b(?:down|drain|drained|draining|fail|failing)\*?\s.{0,160}\bnot responding\b)re",
             R"re((?i)(?:node name: (?P<node>[\w.-]+)|(?:reconnect to|lost contact with) (?:\S+@)?(?P<node2>[\w.-]+)))re"},
            // slurmctld's own log: a job requeued because its node failed, a node set DOWN or
            // failing its health check (AWS ParallelCluster, cloud nodes that fail to resume).
            {"slurmctld_node_down", C::kNodeFailure, K::kCause, 0.85,
             R"re((?i)requeue job (?:JobId=)?\d+ due to failure of node|Requeuing job \S+ due to node failure|update_node: node \S+ state set to DOWN|reason set to: [^\n]*(?:health check failed|not responding)|Killing (?:job|JobId=)\S* on (?:failed|DOWN) node|node \S+ not responding, setting DOWN)re",
             R"re((?i)(?:failure of node|update_node: node|Killing \S+ on failed node) (?P<node>[\w.-]+))re"},
            // A node that failed before or under the job as the resource managers report it:
            // SLURM's prolog failing on a node (the node is drained, the allocation revoked),
            // PBS/Torque unable to reach a node's MOM, a Kubernetes node NotReady, and Google
            // Batch's reserved exit codes for a VM that stopped reporting (50002), rebooted
            // (50003), hung (50004) or was recreated (50006) under the task.
            {"node_unavailable", C::kNodeFailure, K::kCause, 0.8,
             R"re((?i:Prolog failure on node|prolog (?:failed|failure|error) on|Job allocation \d+ has been revoked|send to MOM .{0,60}failed|MOM rejected|\bmom\b.{0,40}\b(?:is down|not responding|unreachable))|^\S+\s+NotReady\b|\bNodeNotReady\b)re",
             R"re((?i)(?:Prolog failure on node|send to MOM) '?(?P<node>[\w.-]+))re"},
            {"batch_exit_node", C::kNodeFailure, K::kCause, 0.8, RS_EXIT R"re(5000[2346]\b)re",
             ""},
            // A node lost in the other words the resource managers use: slurmstepd's "DUE TO JOB
            // NOT RUNNING" (the controller no longer sees the job on the node), the state
            // BOOT_FAIL, squeue's "launch failed requeued held", slurmctld's "unexpectedly
            // rebooted", a Kubernetes node not ready or its pods evicted by the taint manager,
            // srun's "Nodes … are still not ready", LSF's UNKWN state and TERM_REMOVE_HUNG_JOB
            // (execution host unavailable), PBS Pro's JOB_EXEC_RERUN_SIS_FAIL/RERUN_MS_FAIL
            // (mother superior or a sister lost), the kernel panicking or reporting machine checks,
            // and any scheduler's "its node is down" (Nomad's lost allocations).
            {"node_failure_other", C::kNodeFailure, K::kCause, 0.8,
             R"re((?i)DUE TO JOB NOT RUNNING|\bBOOT_FAIL\b|launch failed requeued held|\bunexpectedly rebooted\b|\bhas been rebooted\b|\bnode (?:\S+ )?(?:was |has )?(?:rebooted|power[- ]?cycled)\b|Kernel panic - not syncing|\bmce: \[Hardware Error\]|Machine check events logged|node\.kubernetes\.io/not-ready|\bDeletionByTaintManager\b|\bnodes? (?:\S+ )?(?:is |are |was |became )?(?:still )?not[ -]?ready\b|\bUNKWN\b|\bnode \S+ is down\b|\b(?:its|the|their|whose) nodes? (?:is|are|was|were|went|has gone) down\b|\bnodes? \S+ (?:is|are) not responding\b|\blost\*? node\b|TERM_REMOVE_HUNG_JOB|hung job removed|JOB_EXEC_RERUN_(?:ON_)?(?:SIS|MS)_FAIL|Mother superior connection failed)re",
             ""},
            // PBS Pro's negative exit statuses for a lost sister (-14) or mother superior (-20).
            {"pbs_exit_node", C::kNodeFailure, K::kCause, 0.75, RS_EXIT R"re(-(?:14|20)\b)re",
             ""},
            {"node_disconnected", C::kNodeFailure, K::kSymptom, 0.5,
             R"re((?i)job disconnected, attempting to reconnect|connection to \S+ closed by remote host|Destination Host Unreachable)re",
             ""},

            // ---- preemption
            // ------------------------------------------------------------------------
            {"slurm_preemption", C::kPreemption, K::kCause, 0.98, R"re(DUE TO PREEMPTION)re",
             ""},
            {"preempted", C::kPreemption, K::kCause, 0.85,
             R"re(\bPREEMPTED\b|[Rr]equeued? (?:due to|after|because of) preemption|was preempted|Reason:\s+Preempt|[Ss]pot (?:instance )?(?:interruption|termination notice)|instance is being reclaimed|[Ss]pot ITN|SPOT_ITN|[Ii]nstance will be interrupted|instances\.preempted|in response to imminent node shutdown|\bPreempted by\b)re",
             "", true},
            // The same in other words: Azure scheduled events ("EventType":"Preempt", "Spot VM
            // is being evicted"), Azure ML ("PreemptionError … pre-empted"), LSF TERM_PREEMPT,
            // HTCondor evictions, Kueue, GKE, Google Pipelines (PAPI code 14, "worker was
            // terminated"; code 10's "assigned worker has failed", which Cromwell itself retries
            // as a preemption), dstack's spot interruptions, AWS Batch reclaiming its EC2 host.
            {"preempted_other", C::kPreemption, K::kCause, 0.88,
             R"re((?i)\b(?:was|been|being|is|were|are|got) pre-?empted\b|\bPreemptionError\b|\bINTERRUPTED_BY_NO_CAPACITY\b|PAPI error code 14\b|\bworker was terminated\b|The assigned worker has failed to complete the operation|\bevicted \(preempt\)|"EventType": ?"Preempt"|\bTERM_PREEMPT\b|\bspot (?:vm|instance|node|capacity|pod)s? (?:is |was |has been |will be |are )?(?:being )?(?:evicted|reclaimed|interrupted|terminated|preempted)|\b(?:spot|preemptible) (?:instance |vm |node )?(?:eviction|termination|interruption)|\beviction notice\b|\bjob was evicted\b|preempted (?:to|in order to) (?:accommodate|admit)|Host EC2 (?:\(instance [\w-]+\) )?terminated|termination (?:is )?imminent|JOB_EVICTED\b|\bJobEvictedEvent\b)re",
             R"re((?i)\b(?P<capacity>spot|preemptible|low[- ]priority)\b)re", true},

            // Preemption as a status word and in the other schedulers' sentences: a job whose
            // state, reason or message is "Preempted" (Armada, Kueue, Volcano, Beaker), "has been
            // (manually) preempted", PBS's "Job preempted by requeuing", Kubernetes' "Preempted
            // by pod … on node …" and PreemptionByScheduler, LSF's "job killed after preemption"
            // and TERM_RC_RECLAIM (a resource-connector host reclaimed), slurmctld's "requeued to
            // reclaim resources for", low-priority/spot/preemptible capacity taken back, EC2's
            // Server.SpotInstanceTermination.
            {"preempted_status", C::kPreemption, K::kCause, 0.85,
             R"re((?i)^\W{0,3}preempted\b|["'=:]\s*["']?preempted\b|\b(?:has|have|had) been \w+ly pre-?empted\b|\b(?:was|were|got|is being) \w+ly pre-?empted\b|\b(?:job|pod|task|workload) preempted by\b|\bpreemption (?:was |has been )?requested\b|\bPreemptionByScheduler\b|\b(?:reason|status|state|phase)["']?\s*[:=]\s*["']?preempt(?:ing|ion)\b|\bjob killed after preemption\b|(?-i:\b(?:due to|because of|by) (?:a |the |spot |node )?pre-?emption\b)|\bpreemption (?:notice|signal|warning|event)\b|\bTERM_RC_RECLAIM\b|\b(?:execution host|host|instance|vm|machine)s? (?:\S+ )?(?:is |was |were |has been |is being |got )?reclaimed\b|to reclaim resources for\b|\b(?:low[- ]priority|spot|preemptible|preemptable) (?:\S+ ){0,2}(?:was |were |has been |is being |got )?(?:preempted|reclaimed|evicted|interrupted)\b|Server\.Spot(?:Instance)?(?:Termination|Shutdown)|\b(?:tpu|vm|node|instance|worker|host|pod|slice)s? (?:[\w.-]*\d[\w.-]* )?(?:was |has been |got )?preempted\b|\b(?:spot|preemptible) (?:instance|vm|node)s? (?:is |was |has been )?scheduled for (?:termination|interruption|eviction))re",
             R"re((?i)\b(?P<capacity>spot|preemptible|low[- ]priority)\b)re", true},

            // ---- NCCL
            // ------------------------------------------------------------------------------
            // Google Batch's reserved exit code for a task whose Spot VM was preempted.
            {"batch_exit_preempted", C::kPreemption, K::kCause, 0.85, RS_EXIT R"re(50001\b)re",
             ""},
            // The machine shut down under the job by its host, not by the job: a CI runner or
            // agent told to shut down, the hypervisor's ACPI power button. On cloud machines that
            // is the provider taking the VM back; weak, since an operator can do the same.
            {"host_shutdown", C::kPreemption, K::kCause, 0.55,
             R"re((?i)(?:runner|agent|worker|instance|vm|node) has received a shutdown signal|\bPower key pressed\b|system is (?:going down for|powering off))re",
             ""},

            {"nccl_watchdog_timeout", C::kNcclTimeout, K::kCause, 0.9,
             R"re(Watchdog caught collective operation timeout)re",
             R"re((?:\[Rank (?P<rank>\d+)\] )?Watchdog caught collective operation timeout: WorkNCCL\(SeqNum=(?P<seq>\d+), OpType=(?P<op>\w+)(?:.*?Timeout\(ms\)=(?P<timeout_ms>\d+))?\)(?: ran for (?P<ran_ms>\d+) milliseconds)?)re"},
            {"nccl_timed_out", C::kNcclTimeout, K::kCause, 0.75,
             R"re(Some NCCL operations have failed or timed out|ProcessGroupNCCL.{0,80}(?:timed out|timeout)|NCCL watchdog thread terminated|watchdog got stuck|Heartbeat monitor timed out|NCCL communicator was aborted|WorkNCCL\(SeqNum=\d+.{0,300}\) timed out|WorkNCCL::checkTimeout\b)re",
             ""},
            {"dist_timeout", C::kNcclTimeout, K::kCause, 0.5,
             R"re(DistStoreError: .*[Tt]imed? ?out|Socket Timeout|torch\.distributed\.DistNetworkError|Timed out initializing process group|store based barrier.{0,80}[Tt]imed? ?out)re",
             ""},
            // Horovod's stall inspector, Gloo and other collective libraries timing out.
            {"collective_timeout_other", C::kNcclTimeout, K::kCause, 0.7,
             R"re((?i)collective operation timeout|\bNCCL (?:operation )?timed? ?out|Stalled ranks|One or more tensors were submitted to be reduced|\bgloo\b.{0,60}timed? ?out|\bbarrier\b.{0,30}timed? ?out)re",
             ""},
            {"nccl_error", C::kNcclError, K::kCause, 0.85,
             R"re(NCCL error in:|\bnccl(?:System|Remote|Internal|UnhandledCuda|InvalidUsage)Error\b|DistBackendError: NCCL error|\bnccl\w+(?:\([^)]*\))? failed: (?:unhandled|remote|internal|invalid)|NCCL: unhandled (?:system|cuda) error)re",
             R"re(NCCL error in: (?P<where>[^,]+), (?P<nccl_error>[^,\n]+))re"},
            // Also NCCL's result by number as its callers check it (Caffe2's "status ==
            // ncclSuccess. 2 vs 0", ncclResult_t 1-7), NCCL's own CUDA check ("Cuda failure 217
            // 'peer access is not supported between these two devices'") wherever it is printed,
            // and its set-up refusals (Duplicate GPU detected).
            {"nccl_error_other", C::kNcclError, K::kCause, 0.8,
             R"re(NCCL error: |NCCL [Ee]rror \d+: |NCCL error \S+\.\w+:\d+|remote process exited or there was a network error|RCCL error|ncclSuccess\W{0,3}\(?[1-7] vs\.? 0\b|(?:^|[^A-Za-z])Cuda failure (?:\d+ )?'|Duplicate GPU detected|ncclCommInit\w* failed|IBV_WC_\w+_ERR\b|transport retry counter exceeded|Gloo connectFullMesh failed)re",
             ""},
            {"nccl_ib_error", C::kNcclError, K::kCause, 0.85,
             R"re(NET/\w+ ?: ?Got completion (?:from peer \S+ )?with (?:error|status=)|NET/Socket : Connection closed by remote peer|NCCL failure)re",
             R"re(with (?:error |status=)(?P<ib_error>\d+))re"},
            // NCCL's own WARN lines for its sockets, bootstrap and set-up ("include/socket.h:344
            // WARN Socket creation failed" in 2.2, "NCCL WARN socketProgress: Connection closed
            // by remote peer", "init.cc:981 NCCL WARN Invalid rank requested"): the
            // communicator could not be built or lost its peer.
            {"nccl_warn_failure", C::kNcclError, K::kCause, 0.8,
             R"re((?:\.(?:h|cc):\d+ |NCCL )WARN (?:socketProgress|[Ss]ocket\w*|[Bb]ootstrap\w*|Net\b|NET/\w+|Invalid rank|Duplicate GPU|Connect to|Call to \w+|Error while)[^\n]*?(?:failed|[Ee]rror|closed|refused|reset|requested|detected|[Tt]imeout|timed out|truncated|no socket interface|wrong|mismatch|unexpected)|(?:\.(?:h|cc):\d+ |NCCL )WARN Error while|\bWARN (?:\S+\.(?:cu|cc|h):\d+ )?Cuda failure ')re",
             ""},
            // NCCL's bootstrap retrying a refused or timed-out connection, logged at INFO: half
            // strength next to another cause, the cause when nothing else is said.
            {"nccl_connect_retry", C::kNcclError, K::kCause, 0.6,
             R"re(NCCL INFO (?:Call to connect returned|socketStartConnect|Connect to \S+ failed)[^\n]*(?:refused|timed out|No route to host|retrying))re",
             ""},
            {"nccl_warn", C::kNcclError, K::kSymptom, 0.35, R"re(NCCL WARN)re", ""},

            // ---- GPU hardware
            // ----------------------------------------------------------------------
            {"nvrm_xid", C::kGpuHardware, K::kXid, 0.95, R"re(Xid \(?PCI:)re",
             R"re((?:(?P<node>[\w-]+) kernel: .*?)?Xid \((?P<pci>PCI:[0-9A-Fa-f:.]+)\): (?P<xid>\d+))re"},
            {"fallen_off_bus", C::kGpuHardware, K::kCause, 0.95,
             R"re(fallen off the bus|GPU is lost|Unable to determine the device handle for GPU|NVIDIA Corporation .*\(rev ff\))re",
             ""},
            {"uncorrectable_ecc", C::kGpuHardware, K::kCause, 0.92,
             R"re([Uu]ncorrectable ECC error|cudaErrorECCUncorrectable|CUDA_ERROR_ECC_UNCORRECTABLE|Double Bit ECC|row remapp(?:ing|er) (?:failure|failed)|Row Remapping Failure)re",
             ""},
            {"gpu_uncorrectable_nvlink", C::kGpuHardware, K::kCause, 0.8,
             R"re(NVLink (?:error|fatal)|uncorrectable NVLink)re", ""},
            // Xid codes outside the kernel's own line (DCGM, nvidia-smi, Kubernetes device
            // plugin) and the driver's other words for a GPU that is gone (a GSP-era NVRM status
            // of NV_ERR_RESET_REQUIRED among them).
            {"xid_other", C::kGpuHardware, K::kXid, 0.9,
             R"re(\b(?:Xid|XID)(?: error)?(?: code)?[ :=]+\d+)re",
             R"re((?:Xid|XID)(?: error)?(?: code)?[ :=]+(?P<xid>\d+))re"},
            {"gpu_lost_other", C::kGpuHardware, K::kCause, 0.88,
             R"re((?i)RmInitAdapter failed|GPU requires reset|GPU reset (?:is )?required|\bNV_ERR_RESET_REQUIRED\b|NVRM: .{0,160}\bReset required\b|uncorrectable (?:ECC|memory|PCIe|NVLink) errors?|AER: (?:Multiple )?Uncorrected \(Fatal\)|NVLink (?:is )?(?:down|inactive)|cudaErrorDevicesUnavailable|Detected Critical Xid Error|retired pages pending|pending page retirement|row remapping (?:is )?pending|remapped rows? pending|\bDCGM_FR_(?:VOLATILE_DBE|XID_ERROR|ROW_REMAP|RETIRED_PAGES|NVLINK_DOWN|NVLINK_ERROR|PCIE|SRAM|UNCONTAINED|FALLEN_OFF_BUS|GPU_LOST|UNCORRECTABLE)\w*|\bamdgpu\b.{0,80}\b(?:GPU reset begin|ring \S+ timeout|GPU recovery|hardware error)|HW Exception by GPU node)re",
             ""},

            // CUDA's "unknown error" in words (PyTorch's "CUDA unknown error - this may be due to
            // an incorrectly set up environment", "CUDA error: unknown error", the enum names):
            // a symptom, like code 999 (the numbered-errors table below).
            {"cuda_unknown_error", C::kGpuHardware, K::kSymptom, 0.55,
             R"re(CUDA unknown error|CUDA error: unknown error|\bcudaErrorUnknown\b|\bCUDA_ERROR_UNKNOWN\b)re",
             ""},

            // ---- illegal memory access
            // -------------------------------------------------------------
            {"cuda_illegal_access", C::kIllegalMemoryAccess, K::kCause, 0.95,
             R"re(illegal memory access was encountered|cudaErrorIllegalAddress|CUDA_ERROR_ILLEGAL_ADDRESS|misaligned address|illegal instruction was encountered)re",
             ""},
            {"device_side_assert", C::kIllegalMemoryAccess, K::kCause, 0.95,
             R"re(device-side assert(?:ion)? triggered|\.cu:\d+: .*Assertion .* failed)re",
             R"re((?P<kernel_file>[\w./-]+\.cu):(?P<kernel_line>\d+): .*Assertion `(?P<assertion>[^`']+))re"},
            // An unspecified launch failure is the GPU or its driver failing under a kernel
            // (Xid 79, 48, 62 come with it), not the kernel's own bad access: gpu_hardware, and
            // weak, so that a named bad access or an Xid decides.
            {"cuda_launch_failure", C::kGpuHardware, K::kCause, 0.55,
             R"re(unspecified launch failure|CUDA_ERROR_LAUNCH_FAILED|cudaErrorLaunchFailure)re", ""},
            // compute-sanitizer/cuda-gdb reports, ROCm's memory access fault, CUDA's own
            // assert.
            {"gpu_bad_access_other", C::kIllegalMemoryAccess, K::kCause, 0.9,
             R"re(CUDA_EXCEPTION_\d+|Warp Illegal Address|Invalid __(?:global|shared|local)__ (?:read|write)|Memory access fault by GPU|hipErrorIllegalAddress|cudaErrorAssert|CUDA_ERROR_ASSERT|cudaErrorMisalignedAddress)re",
             ""},

            // ---- segmentation fault
            // ----------------------------------------------------------------
            {"kernel_segfault", C::kSegfault, K::kCause, 0.92,
             R"re(segfault at [0-9a-f]+ ip )re",
             R"re(\b(?P<process>[\w.-]+)\[(?P<pid>\d+)\]: segfault at (?P<address>[0-9a-f]+) ip [0-9a-f]+ sp [0-9a-f]+ error \d+(?: in (?P<object>[^\[\s]+))?)re"},
            {"segmentation_fault", C::kSegfault, K::kCause, 0.88,
             R"re((?i)segmentation fault|\bSIGSEGV\b|\bsignal 11\b|Fatal Python error: Segmentation|Address not mapped)re",
             R"re(Failing at address: (?P<address>0x[0-9a-f]+))re"},
            // Native crashes in other words: MATLAB ("Segmentation violation detected"), R
            // ("caught segfault", "memory not mapped"), gfortran ("invalid memory reference"),
            // SIGBUS, the kernel's general protection fault, Windows/JVM access violations.
            {"native_crash", C::kSegfault, K::kCause, 0.88,
             R"re(Segmentation violation|caught segfault|memory not mapped|invalid memory reference|\bBus error\b|\bSIGBUS\b|Illegal instruction \(core dumped\)|\bSIGILL\b|general protection fault|EXCEPTION_ACCESS_VIOLATION|[Aa]ccess violation|signal \((?:11|7)\))re",
             ""},
            // glibc's heap checks: memory was corrupted by native code before it crashed.
            {"heap_corruption", C::kSegfault, K::kCause, 0.75,
             R"re(double free or corruption|free\(\): invalid|malloc\(\): (?:corrupted|memory corruption|unaligned)|corrupted size vs\. prev_size|stack smashing detected)re",
             ""},
            // 128 + 11: the shell's report of SIGSEGV, so a cause, if a weak one.
            // Exit 139 = 128 + SIGSEGV as shells, Docker ("exited with code 139"), gunicorn ("sent
            // code 139") and Hydra ("EXIT CODE: 139", or 11) report it; torch elastic gives the
            // signal negated ("failed (exitcode: -11)").
            {"exit_139", C::kSegfault, K::kCause, 0.6,
             R"re((?i)\b(?:exit(?:ed with)? ?(?:code|status)|exitcode|sent code)[:= ]+(?:139|-11)\b|EXIT CODE: 11\b|\bExited \(139\))re",
             ""},

            // ---- MPI abort
            // -------------------------------------------------------------------------
            {"mpi_abort", C::kMpiAbort, K::kCause, 0.85,
             R"re(MPI_ABORT was invoked on rank|called MPI_Abort|Fatal error in (?:P?MPI[A-Z]*_|internal_)\w+|\bAbort\(\d+\) on node \d+ \(rank \d+|MPI_ERR_\w+|MPI_ERRORS_ARE_FATAL|An error occurred in MPI_\w+|MPIAbortException|\bERROR on proc \d+: )re",
             R"re((?:invoked on rank (?P<rank>\d+)|MPI_Abort\([^,]*, (?P<errorcode>-?\d+)\)(?: - process (?P<rank2>\d+))?))re"},
            // The MPI library's own report of its failure, beside or instead of the abort banner:
            // MPICH's error stack ("MPIR_Init_thread(176)........:", "MPIDI_OFI_mpi_init_hook(1473):"),
            // its internal assertions ("Assertion failed in file ../src/mpi/coll/…") and
            // "internal ABORT - process 0", Cray MPICH's "MPICH ERROR [Rank 0]", MS-MPI's
            // "aborting MPI_COMM_WORLD", Open MPI's "MPI_INIT failed" / "ompi_rte_init failed".
            {"mpi_library_error", C::kMpiAbort, K::kCause, 0.8,
             R"re(internal ABORT - process \d+|MPICH ERROR \[Rank \d+\]|aborting MPI_COMM_WORLD|\bMPI_INIT failed\b|\b(?:orte|ompi_rte|ompi_mpi|opal|ess_\w+|pmix)_init(?:_thread)? failed|Assertion failed in file \S*src/mpid?/|^\W{0,3}(?:MPIR|MPID|MPIDI|MPIC|MPII|PMPI)_\w+\(\d+\)\.*:)re",
             ""},
            // The MPI runtime's report that a rank went away by itself: it aborted (SIGABRT, exit
            // 134) or vanished without MPI_Finalize. Weak: a named cause on that rank wins.
            {"mpi_rank_aborted", C::kMpiAbort, K::kCause, 0.6,
             R"re((?i)peer process has unexpectedly disconnected|\bsignal 6 \(Aborted\)|EXIT CODE: 134\b|killed by signal 6\b)re",
             ""},
            {"mpi_bad_termination", C::kMpiAbort, K::kSymptom, 0.55,
             R"re(BAD TERMINATION OF ONE OF YOUR APPLICATION PROCESSES|(?:mpirun|prterun) has exited due to process rank|(?:mpirun|prterun) detected that one or more processes exited with non-zero status|Primary job +terminated normally, but \d+ process returned|MPI_Abort)re",
             R"re(process rank (?P<rank>\d+))re"},

            // ---- disk full and quota
            // ---------------------------------------------------------------
            {"no_space_left", C::kDiskFull, K::kCause, 0.95,
             R"re((?i)no space left on device|\[Errno 28\]|\bENOSPC\b|node was low on resource: ephemeral-storage|ephemeral[- ]local[- ]storage usage exceeds|exceeded (?:its |the )?(?:local )?ephemeral[- ]storage|Resource exhausted: /|(?:Resource exhausted|ResourceExhaustedError): (?:\.{0,2}/)?[\w.-]+/\S*\s*$)re",
             R"re(No space left on device(?:: '(?P<path>[^']+)')?)re"},
            {"short_write", C::kDiskFull, K::kCause, 0.6,
             R"re(\bshort write\b|unexpected pos \d+ vs \d+)re", ""},
            {"quota_exceeded", C::kDiskFull, K::kCause, 0.92,
             R"re(Disk quota exceeded|\[Errno 122\]|\bEDQUOT\b|[Qq]uota exceeded|over (?:disk |block |file )?quota)re",
             R"re(Disk quota exceeded(?:: '(?P<path>[^']+)')?)re"},
            {"disk_full_other", C::kDiskFull, K::kCause, 0.85,
             R"re((?i)\bdisk (?:is )?full\b|\b(?:file ?system|device|volume|partition|disk) (?:is )?(?:full|out of space)\b|out of (?:disk|storage) space|not enough (?:free )?(?:disk )?space|insufficient (?:disk|storage) space|exceed(?:ed|ing|s)? (?:your |the |its |their )?(?:disk|storage|file|inode|block|jobfs|scratch|file ?system|project) (?:quota|limit)|(?:disk|scratch|storage) usage exceeded|file write failed|PytorchStreamWriter failed writing|database or disk is full|\bSQLITE_FULL\b)re",
             ""},

            // Space and quota in other words: installers' "ensure there is enough space in
            // /tmp", "insufficient space on", CI runners "running out of disk space", inodes,
            // block/file/inode quota reached, Kubernetes DiskPressure evictions and emptyDir
            // limits, SIGXFSZ (a file-size limit), Lustre's ENOSPC/EDQUOT as return codes,
            // HTCondor's disk request, PBS jobfs/scratch limits.
            {"disk_space_other", C::kDiskFull, K::kCause, 0.85,
             R"re((?i)\b(?:ensure|make sure|check) (?:that )?there is enough (?:free )?(?:disk )?space\b|\binsufficient (?:free )?(?:disk |storage )?space (?:on|in|at|left)\b|\b(?:running|ran|run) (?:low on|out of) (?:free )?(?:disk|storage) space\b|\bout of (?:free )?inodes\b|\bno (?:free )?inodes\b|\b(?:block|inode|disk|storage) (?:quota|limit) (?:was |has been )?(?:exceeded|reached)\b|had condition: \[?DiskPressure|\bDiskPressure\s+True\b|Usage of EmptyDir volume .{0,80} exceeds the limit|File size limit exceeded|\bSIGXFSZ\b|LustreError.*\brc = -(?:28|122)\b|(?:gone|went|is|was) over (?:its |the )?disk (?:limit|request|usage)|\b(?:jobfs|scratch|local disk) (?:usage |space )?(?:\S+ )?exceeded (?:the |its )?(?:limit|quota|allocation)\b)re",
             R"re((?i)(?P<inodes>\binodes?\b)|space (?:in|on|at) (?P<path>/[\w./-]+))re"},

            // A temporary directory that cannot be written: Python's tempfile after trying every
            // candidate ("No usable temporary directory found in ['/tmp', …]", raised as
            // FileNotFoundError), R at start-up ("cannot create 'R_TempDir'"), and the tools'
            // "cannot create temporary file". A full /tmp is the common cause, permissions the
            // other, so a cause a little weaker than the space messages themselves.
            {"tmpdir_unusable", C::kDiskFull, K::kCause, 0.8,
             R"re(No usable temporary directory found in|cannot create '?R_TempDir|(?i:(?:cannot|can't|could not|couldn't|unable to|failed to) (?:create|make|write to|open) (?:a |the |any )?(?:new )?temp(?:orary)? (?:file|directory|dir|folder)))re",
             ""},

            // ---- missing file
            // ----------------------------------------------------------------------
            {"python_file_not_found", C::kMissingFile, K::kCause, 0.9,
             R"re(FileNotFoundError|IOError: \[Errno 2\]|OSError: \[Errno 2\])re",
             R"re(No such file or directory: '(?P<path>[^']+)')re"},
            {"no_such_file", C::kMissingFile, K::kCause, 0.6,
             R"re((?i)no such file or directory)re",
             R"re((?:'(?P<path>[^']+)'|(?:^|\s)(?P<path2>[^\s:']+): No such file))re"},
            // An input that is not there as its reader says it: Lua Torch ("cannot open <x.t7> in
            // mode r"), Hugging Face (no config/tokenizer/weights at the path), OpenCV asserting
            // on the empty image imread returns for a bad path, and a checkpoint that is only a
            // Git LFS pointer (pickle's "invalid load key, 'v'": the text starts "version"), and
            // checkpoint loaders saying the file is not there (mmcv "X is not a checkpoint file",
            // raised when the path is no file; "No checkpoint found at" raised as an error, not
            // the notice of a run that starts from scratch; Lightning's "Checkpoint at X not
            // found"; TensorFlow's "Failed to find any matching files for").
            {"missing_image_or_file", C::kMissingFile, K::kCause, 0.85,
             R"re(could not open image \S+|does not appear to have a file named|Not found: "[^"]+": No such file|cannot open <.+> in mode|couldn't find (?:any such file|a file named)|Can't load (?:tokenizer|config|the model|weights|model)\b|is not a local folder and is not a valid model identifier|!_?\w*\.empty\(\) in function|invalid load key, 'v'|version https://git-lfs|is not a checkpoint file|(?:Error|Exception):\s*(?:=> ?)?[Nn]o checkpoint (?:file )?(?:was )?found|[Cc]heckpoint (?:at |file )?\S+ (?:not found|does not exist)|Failed to find any matching files for)re",
             R"re((?:could not open image (?P<path>[^\s:]+)|(?P<path2>\S+) does not appear to have a file named (?P<name>[\w.-]+)))re"},
            {"command_not_found", C::kMissingFile, K::kCause, 0.75,
             R"re(: command not found|execve\(\): .*: No such file|^\S+: (?:line )?\d+: [\w./+-]+: not found\s*$|: (?:未找到命令|命令未找到|Kommando nicht gefunden|commande introuvable|orden no encontrada|comando non trovato|コマンドが見つかりません|команда не найдена))re",
             R"re((?P<command>[\w./+-]+): (?:command not found|not found\s*$|未找到命令|命令未找到|Kommando nicht gefunden|commande introuvable|orden no encontrada|comando non trovato|コマンドが見つかりません|команда не найдена))re"},
            // 127 is the shell's exit code for a command it could not find; weak, as a program
            // may exit 127 by itself.
            {"exit_127", C::kMissingFile, K::kCause, 0.55, RS_EXIT R"re(127\b)re", ""},
            {"cannot_open_file", C::kMissingFile, K::kCause, 0.75,
             R"re((?i)(?:cannot|can't|could ?n[o']t|unable to|failed to) (?:open|find|read|load|locate|access) (?:the )?(?:input |data |config |checkpoint |restart |mesh |parameter |model |weights? )?(?:file|script|directory|jarfile|checkpoint|dataset)|does not exist|\S\.(?:pt|pth|ckpt|h5|bin|safetensors|json|ya?ml|csv|npy|npz|t7|pkl|tfrecord) (?:was )?not found)re",
             R"re((?i)file[: ]+['"]?(?P<path>[\w./~-]+))re"},
            // The program itself is missing: Open MPI ("unable to find the specified
            // executable"), Hydra ("execvp error on file"), containers ("executable file not
            // found in $PATH"), HTCondor ("Failed to execute"); and other languages' not-found
            // errors.
            {"executable_not_found", C::kMissingFile, K::kCause, 0.88,
             R"re((?i)unable to find the specified executable|could not (?:find|access or execute) (?:an |the )?executable|executable file not found in \$PATH|execvp error on file|failed to execute '|no such file or directory: unknown|exec: \S+: not found)re", R"re((?:Executable: *(?P<path>\S+)|execvp error on file (?P<path2>\S+)|exec: "?(?P<command>[\w./+-]+)"?: executable file not found|[Ff]ailed to execute '(?P<path3>[^']+)'))re"},
            {"file_not_found_other", C::kMissingFile, K::kCause, 0.8,
             R"re(FileNotFoundException|NoSuchFileException|\b[Ff]ile not found\b|\bENOENT\b|[Cc]an ?not open file|cannot stat '|[Uu]nable to (?:find|open) (?:file|input|directory))re",
             R"re((?:[Ff]ile not found\b.*?\bfile[ =:]+['"]?(?P<path>/[\w./~-]+)|(?:[Ff]ile not found:|cannot stat|FileNotFoundException:|NoSuchFileException:) *['"]?(?P<path2>[\w./~-]+)))re"},

            // ---- import errors
            // ---------------------------------------------------------------------
            {"module_not_found", C::kImportError, K::kCause, 0.97, R"re(ModuleNotFoundError)re",
             R"re(No module named '(?P<module>[^']+)')re"},
            {"python_import_error", C::kImportError, K::kCause, 0.9, R"re(ImportError: )re",
             R"re(cannot import name '(?P<name>[^']+)'(?: from '(?P<module>[^']+)')?)re"},
            {"shared_library_missing", C::kImportError, K::kCause, 0.95,
             R"re((?i)cannot open shared object|error while loading shared libraries)re",
             R"re((?P<library>[\w.+-]+\.so[\w.]*): cannot open shared object file)re"},
            {"undefined_symbol", C::kImportError, K::kCause, 0.75,
             R"re(undefined symbol: |version `GLIBC(?:XX)?_[\d.]+' not found)re",
             R"re(undefined symbol: (?P<symbol>\S+))re"},
            {"r_package_missing", C::kImportError, K::kCause, 0.9,
             R"re(there is no package called|Package \w+ not found in current path)re", ""},
            // Other languages' missing modules: Perl, Java, Node, Julia, R, MATLAB toolboxes,
            // and Python's own "No module named" from `python -m`; Windows DLLs that do not load
            // (WinError 126 module not found, 127 procedure not found, 193 wrong architecture,
            // 1114 initialisation failed, and PyTorch's "Error loading "…\fbgemm.dll" or one of
            // its dependencies", whatever the system's language).
            {"import_error_other", C::kImportError, K::kCause, 0.85,
             R"re(No module named ['"]?\w|module '[\w.]+' not found|no field package\.preload\['|Can't locate \S+\.pm in @INC|ClassNotFoundException|NoClassDefFoundError|Cannot find module '|is required but does not seem to be installed|package or namespace load failed|symbol lookup error|DLL load failed|The specified module could not be found|UnsatisfiedLinkError|cannot be preloaded|Invalid MEX-file|Unrecognized function or variable|[Uu]ndefined function '|could not load (?:library|dynamic library|module) |\[WinError (?:126|127|193|1114)\]|Error loading "[^"]+\.dll" or one of its dependencies)re",
             R"re(No module named ['"]?(?P<module>[\w.]+))re"},
            // An environment-module system that cannot find or load a module (Lmod, Tcl
            // Environment Modules, Spack): an input of the job that does not exist, so
            // missing_file, not a Python import. The job then fails for want of the program or
            // library the module would have provided.
            {"env_module_unknown", C::kMissingFile, K::kCause, 0.7,
             R"re(The following module\(s\) are unknown|Unable to locate a modulefile for|These module\(s\)(?: or extension\(s\))? exist but cannot be loaded|ModuleCmd_Load\.c\(\d+\):ERROR|matches no installed packages)re",
             R"re((?:are unknown: "(?P<module>[^"]+)"|modulefile for '(?P<module2>[^']+)'))re"},

            // ---- CUDA driver and runtime
            // -----------------------------------------------------------
            {"cuda_driver_insufficient", C::kDriverMismatch, K::kCause, 0.97,
             R"re(driver version is insufficient for CUDA runtime|cudaErrorInsufficientDriver|CUDA_ERROR_SYSTEM_DRIVER_MISMATCH|unsupported display driver / cuda driver combination|forward compatibility was attempted on non supported HW)re",
             ""},
            {"nvidia_driver_too_old", C::kDriverMismatch, K::kCause, 0.97,
             R"re(NVIDIA driver on your system is too old)re",
             R"re(found version (?P<driver_version>\d+))re"},
            {"container_cuda_requirement", C::kDriverMismatch, K::kCause, 0.95,
             R"re(requirement error: unsatisfied condition: cuda|please update your driver to a newer version|PTX was compiled with an unsupported toolchain|CUDA_ERROR_UNSUPPORTED_PTX_VERSION|unsupported CUDA version: driver [\d.]+ < image)re",
             ""},
            {"nvml_mismatch", C::kDriverMismatch, K::kCause, 0.95,
             R"re((?i)Driver/library version mismatch)re", ""},
            {"no_kernel_image", C::kDriverMismatch, K::kCause, 0.85,
             R"re(no kernel image is available for execution on the device|is not compatible with the current PyTorch installation)re",
             R"re((?P<gpu_name>NVIDIA [\w -]+) with CUDA capability (?P<capability>sm_\d+))re"},
            {"no_nvidia_driver", C::kDriverMismatch, K::kCause, 0.75,
             R"re(couldn't communicate with the NVIDIA driver|Found no NVIDIA driver on your system)re",
             ""},
            // PTX, binary and driver-version mismatches in other runtimes: NVHPC/OpenACC
            // ("cuModuleLoadDataEx returned error 222: Unsupported PTX version"), TensorFlow
            // (kernel vs DSO version), CuPy/Numba, HIP. Not XLA's "driver's CUDA version is …
            // older than the ptxas": a warning after which XLA compiles through the driver.
            {"gpu_binary_mismatch", C::kDriverMismatch, K::kCause, 0.92,
             R"re((?i)unsupported PTX version|cudaErrorUnsupportedPtxVersion|CUDA_ERROR_NO_BINARY_FOR_GPU|no binary for GPU|cudaErrorNoKernelImageForDevice|invalid device function|cudaErrorInvalidDeviceFunction|CUDA driver version is insufficient|kernel version [\d.]+ does not match DSO version|COMPAT_NOT_SUPPORTED_ON_DEVICE|CUDA_ERROR_INSUFFICIENT_DRIVER|cudaErrorSystemDriverMismatch|requires (?:a )?(?:newer|more recent) (?:NVIDIA |CUDA |GPU )?driver|(?:cuInit|cuModuleLoad\w*) returned error (?:35|209|218|222|803|804)\b|hipErrorNoBinaryForGpu|could not insert '?nvidia|NVRM: API mismatch|\bnvidia\w*: (?:Unknown symbol|disagrees about version|version magic)|but (?:JAX|jaxlib|TensorFlow|PyTorch|XLA|it) was (?:built|compiled) (?:against|with) (?:CUDA |cuDNN |cuBLAS |cuSPARSE |cuFFT |NCCL )?version|must be at least as new as the version against which|Loaded runtime (?:CuDNN|cuDNN) library: \S+ but source was compiled with)re",
             ""},

            // ---- numbered CUDA errors (class from CudaErrorByCode)
            // ------------------------------------
            // Every way the runtimes print a cudaError_t/CUresult by number: THC ("cuda runtime
            // error (2)", "THCudaCheck FAIL … error=2"), Caffe/glog ("error == cudaSuccess (2 vs.
            // 0)", "cudaSuccess == cudaStat (0 vs. 39)"), the CUDA samples ("code=35(…)"),
            // "CUDA Error 77:", "CUDA error(700)", NCCL's "Cuda failure 700", "cuda failed with
            // error 2", "cudaGetDeviceProperties returned 35", "cuInit returned error 804".
            {"cuda_error_code", C::kUnknown, K::kCudaError, 0,
             R"re([Cc][Uu][Dd][Aa](?: runtime| driver)? (?:[Ee]rror|[Ff]ailure) ?(?:(?:DRIVER|RUNTIME|[Dd]river|[Rr]untime):? )?[:(#]? ?'?\d+|[Cc][Uu][Dd][Aa] \w+ (?:failure|failed|error) with (?:error|code) \d+|THCudaCheck FAIL.*\berror=\d+|cudaSuccess(?: == \w+)? \(\d+ vs\. \d+\)|\bcode=\d+\(cuda|\bcu(?:da)?[A-Z]\w*(?:\(\))? returned (?:error )?\d+|[Cc][Uu][Dd][Aa] failed with error \d+|\bcudaError(?:_t)?[ =:]+\d+|(?i:error code \(\d+\).*\bcuda|\bcuda\w*\b.*error code \(\d+\)))re",
             ""},

            // ---- data-loader workers
            // ---------------------------------------------------------------
            {"dataloader_worker_killed", C::kDataloaderKilled, K::kCause, 0.9,
             R"re(DataLoader worker \(pid)re",
             R"re(DataLoader worker \(pid(?:\(s\))? (?P<pids>[\d, ]+)\) (?:is killed by signal: (?P<worker_signal>[\w ]+?)\.?\s*$|exited unexpectedly))re"},
            {"dataloader_shm", C::kDataloaderKilled, K::kCause, 0.85,
             R"re((?i)insufficient shared memory|unexpected (?:bus error|segmentation fault|floating-point exception|\w+ error) encountered in (?:the )?(?:data ?loader |reader )?(?:worker|subprocess|child process)s?)re",
             ""},
            {"dataloader_other", C::kDataloaderKilled, K::kCause, 0.88,
             R"re(DataLoader timed out after|unable to write to file </torch_|[Uu]nable to (?:allocate|open) shared memory ?(?:\(shm\)|object </torch_)|worker \(pid[^)]*\) (?:is killed|exited unexpectedly|died)|DataLoader worker (?:\S+ )?(?:is killed by|was killed by|exited unexpectedly|died)|DataLoader (?:\d+ )?workers? (?:\S+ )?(?:exit|exits|exited|died|crashed) unexpectedly)re",
             ""},

            // ---- NaN / Inf divergence
            // --------------------------------------------------------------
            {"nan_loss", C::kNanDivergence, K::kCause, 0.85,
             R"re((?i)loss (?:is|became|=|:) ?(?:nan|inf)\b|(?i)\b(?:loss(?:es)?|outputs?|logits|gradients?|grads?|predictions?|weights?|(?:grad(?:ient)?[_ ])?norms?|activations?|parameters?|params)\b (?:is|are|became|becomes?|turns?|turned|goes|went|gets|got)(?: to| into)? (?:a )?(?:nan|inf)\b|(?i)\bloss (?:has )?diverged\b|(?i)nan loss|(?i)non-finite loss|(?i)loss is not finite|['"]loss['"]: (?:nan|inf)\b|(?i)\bloss\b.{0,40}\bis (?:nan|inf)\b)re",
             ""},
            {"nan_detected", C::kNanDivergence, K::kCause, 0.85,
             R"re(returned nan values|Detected (?:inf|nan|NaN|Inf) or (?:inf|nan|NaN|Inf)|FloatingPointError|Minimum loss scale reached|loss scale already at minimum|tensor contains (?:either )?`?(?:inf|nan)|Tensor had (?:NaN|Inf) values|(?i)\bnon-finite\b|(?i)infinite or nan|(?i)\bfound (?:nan|inf)\b|tensor\(\[+nan\b|(?i)encountered (?:a )?nan|(?i)nan values? detected|(?i)(?:is|became) (?:nan|inf) or (?:nan|inf)|is not finite)re",
             ""},
            // Metrics printed as nan/inf ("train_loss nan", "val_loss=inf", a table row of a
            // step whose every column is nan: "2000  [nan]  [nan]  [nan]"), NaN checks of
            // other frameworks (PaddlePaddle's "There are NAN or INF", scikit-learn's "Input X
            // contains NaN", Keras' TerminateOnNaN, check_numerics). A simulation that blows up
            // (LAMMPS lost atoms, WRF CFL, NAMD atoms too fast) is not here: it ends in the
            // code's own abort, and the corpus labels it mpi_abort.
            {"nan_other", C::kNanDivergence, K::kCause, 0.85,
             R"re((?i)\b\w*(?:loss|cost)\w*['"]?\s*[:=]?\s*[-+]?(?:nan|inf)\b|\b\w*(?:l1|l2|mse|mae|entropy|nll|kl|acc\w*|ppl|perplexity|grad\w*|norm)['"]?\s*[=:]\s*[-+]?(?:nan|inf)\b|\bcontain(?:s|ed|ing)? (?:a |an )?(?:nan|inf)|\bnans? (?:values? )?(?:was |were )?(?:found|encountered)\b|\b(?:nan|inf)s? ?(?:or|and|/) ?(?:nan|inf)\b|\bcheck_?numerics\b|Invalid loss, terminating training|training diverged|^\s*\d+(?:\s+\[?[-+]?(?:nan|inf)(?:,\s*[-+]?(?:nan|inf))*\]?){2,}\s*$)re",
             ""},
            // fp16 loss scaling collapsing: a healthy scale is 2^k >= 1, one driven under 1 (to
            // 0.000244…, or 0) means every step overflows. Printed as notes and warnings.
            {"loss_scale_collapse", C::kNanDivergence, K::kCause, 0.75,
             R"re((?i)loss[_ ]scale(?: to)?[:= ]+0(?:\.\d+)?(?:[^\d.]|$)|decreased lg_loss_scale)re", "",
             true},
            {"gradient_overflow", C::kNanDivergence, K::kSymptom, 0.3,
             R"re(Gradient overflow\.\s+Skipping step|OVERFLOW! Rank \d+ Skipping step)re", ""},

            // ---- Python tracebacks (context, no class)
            // ---------------------------------------------
            // Python's own tracebacks, and faulthandler's dumps (most recent call first). Lines may
            // carry a rank prefix ("[1,0]<stderr>:" from mpirun --tag-output, "[rank3]:", "0: ").
            {"traceback", C::kUnknown, K::kTraceback, 0,
             R"re(Traceback \(most recent call last\)|(?:Current thread|Thread) 0x[0-9a-f]+ (?:\[[^\]]*\] )?\(most recent call first\))re",
             ""},
            {"traceback_frame", C::kUnknown, K::kFrame, 0,
             R"re(^(?:\d+: ?)?\W{0,3}(?:\[[^\]]*\]:?\s*)?\s*File ")re",
             R"re(File "(?P<file>[^"]+)", line (?P<line>\d+),? in (?P<func>\S+))re"},
            {"python_exception", C::kUnknown, K::kException, 0,
             R"re(^(?:\d+: ?)?(?:\[[^\]]*\](?:<std(?:out|err)>)?:?\s*)?[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning)(?::\s|$))re",
             R"re((?P<exception>[A-Za-z_][\w.]*(?:Error|Exception|Exit|Interrupt|Warning))(?::\s*(?P<message>.*))?$)re"},
};
// clang-format on

#undef RS_SIZE
#undef RS_EXIT

// Rows: cause. Bit i set: explains class i. Built from the lists below.
struct Explanation {
  FailureClass cause;
  std::array<FailureClass, 8> effects;
  int count;
};

// Consequences that commonly follow each root cause in the same job's logs.
constexpr Explanation kExplanations[] = {
    // Frameworks report a device allocation failure in host words too (Paddle's MemoryError,
    // Thrust's std::bad_alloc).
    {C::kGpuOom, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kSegfault, C::kHostOom}, 5},
    {C::kHostOom, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kDataloaderKilled}, 4},
    {C::kTimeout,
     {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kSegfault, C::kDataloaderKilled},
     5},
    {C::kNodeFailure, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError}, 3},
    // A reclaimed spot VM looks like a lost node to everyone else.
    {C::kPreemption,
     {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kDataloaderKilled, C::kNodeFailure},
     5},
    {C::kNcclError, {C::kMpiAbort, C::kNcclTimeout}, 2},
    {C::kNcclTimeout, {C::kMpiAbort}, 1},
    // A GPU off the bus also stops the driver answering ("couldn't communicate with the NVIDIA
    // driver").
    {C::kGpuHardware,
     {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kIllegalMemoryAccess, C::kSegfault,
      C::kDriverMismatch},
     6},
    {C::kIllegalMemoryAccess, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kSegfault}, 4},
    {C::kSegfault, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError}, 3},
    {C::kDiskFull, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kMissingFile}, 4},
    {C::kMissingFile, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError}, 3},
    {C::kImportError, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kMissingFile}, 4},
    {C::kDriverMismatch, {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kImportError}, 4},
    // A full /dev/shm is what kills the workers ("unable to write to file </torch_…>: No space
    // left on device").
    {C::kDataloaderKilled,
     {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kSegfault, C::kDiskFull},
     5},
    // A divergence that ends in a crash: NaN indices and probabilities trip device-side
    // asserts, NaN sizes crash native code.
    {C::kNanDivergence,
     {C::kMpiAbort, C::kNcclTimeout, C::kNcclError, C::kSegfault, C::kIllegalMemoryAccess},
     5},
};

// cudaError_t (driver_types.h) and CUresult (cuda.h). CUDA 10.1 renumbered the runtime's
// errors; the old numbers kept here are those no later code reuses.
constexpr CudaErrorInfo kCudaErrors[] = {
    {2, "cudaErrorMemoryAllocation", C::kGpuOom, 0.93},
    {35, "cudaErrorInsufficientDriver", C::kDriverMismatch, 0.95},
    {36, "cudaErrorCallRequiresNewerDriver", C::kDriverMismatch, 0.9},
    {8, "cudaErrorInvalidDeviceFunction (CUDA <= 10.0)", C::kDriverMismatch, 0.85},
    {98, "cudaErrorInvalidDeviceFunction", C::kDriverMismatch, 0.85},
    {48, "cudaErrorNoKernelImageForDevice (CUDA <= 10.0)", C::kDriverMismatch, 0.9},
    {209, "cudaErrorNoKernelImageForDevice", C::kDriverMismatch, 0.9},
    {222, "cudaErrorUnsupportedPtxVersion", C::kDriverMismatch, 0.9},
    {803, "cudaErrorSystemDriverMismatch", C::kDriverMismatch, 0.95},
    {804, "cudaErrorCompatNotSupportedOnDevice", C::kDriverMismatch, 0.95},
    {39, "cudaErrorECCUncorrectable (CUDA <= 10.0)", C::kGpuHardware, 0.9},
    {214, "cudaErrorECCUncorrectable", C::kGpuHardware, 0.9},
    {80, "cudaErrorNvlinkUncorrectable (CUDA <= 10.0)", C::kGpuHardware, 0.85},
    {220, "cudaErrorNvlinkUncorrectable", C::kGpuHardware, 0.85},
    {46, "cudaErrorDevicesUnavailable", C::kGpuHardware, 0.6},
    {719, "cudaErrorLaunchFailure", C::kGpuHardware, 0.55},
    {77, "cudaErrorIllegalAddress (CUDA <= 10.0)", C::kIllegalMemoryAccess, 0.95},
    {700, "cudaErrorIllegalAddress", C::kIllegalMemoryAccess, 0.95},
    {59, "cudaErrorAssert (CUDA <= 10.0)", C::kIllegalMemoryAccess, 0.93},
    {710, "cudaErrorAssert", C::kIllegalMemoryAccess, 0.93},
    {72, "cudaErrorHardwareStackError (CUDA <= 10.0)", C::kIllegalMemoryAccess, 0.85},
    {714, "cudaErrorHardwareStackError", C::kIllegalMemoryAccess, 0.85},
    {73, "cudaErrorIllegalInstruction (CUDA <= 10.0)", C::kIllegalMemoryAccess, 0.9},
    {715, "cudaErrorIllegalInstruction", C::kIllegalMemoryAccess, 0.9},
    {74, "cudaErrorMisalignedAddress (CUDA <= 10.0)", C::kIllegalMemoryAccess, 0.93},
    {716, "cudaErrorMisalignedAddress", C::kIllegalMemoryAccess, 0.93},
    {75, "cudaErrorInvalidAddressSpace (CUDA <= 10.0)", C::kIllegalMemoryAccess, 0.9},
    {717, "cudaErrorInvalidAddressSpace", C::kIllegalMemoryAccess, 0.9},
    {76, "cudaErrorInvalidPc (CUDA <= 10.0)", C::kIllegalMemoryAccess, 0.9},
    {718, "cudaErrorInvalidPc", C::kIllegalMemoryAccess, 0.9},
    // The runtime's and the driver's "unknown error": most often a GPU or driver in a bad state
    // (fallen off the bus, failing power, after a suspend), but it follows other causes too, so
    // a symptom that names gpu_hardware only when nothing else in the log does.
    {999, "cudaErrorUnknown", C::kGpuHardware, 0.55, true},
    {30, "cudaErrorUnknown (CUDA <= 10.0)", C::kGpuHardware, 0.55, true},
};

constexpr std::string_view kClassNames[kFailureClassCount] = {
    "gpu_oom",           "host_oom",       "timeout",
    "node_failure",      "preemption",     "nccl_timeout",
    "nccl_error",        "gpu_hardware",   "illegal_memory_access",
    "segfault",          "mpi_abort",      "disk_full",
    "missing_file",      "import_error",   "driver_mismatch",
    "dataloader_killed", "nan_divergence", "unknown",
};

}  // namespace

std::string_view FailureClassName(FailureClass c) { return kClassNames[static_cast<int>(c)]; }

std::optional<FailureClass> FailureClassFromName(std::string_view name) {
  for (int i = 0; i < kFailureClassCount; ++i) {
    if (kClassNames[i] == name) return static_cast<FailureClass>(i);
  }
  return std::nullopt;
}

std::span<const Signature> AllSignatures() { return kSignatures; }

const CudaErrorInfo* CudaErrorByCode(int code) {
  for (const CudaErrorInfo& e : kCudaErrors) {
    if (e.code == code) return &e;
  }
  return nullptr;
}

bool Explains(FailureClass cause, FailureClass effect) {
  for (const auto& e : kExplanations) {
    if (e.cause != cause) continue;
    for (int i = 0; i < e.count; ++i) {
      if (e.effects[static_cast<size_t>(i)] == effect) return true;
    }
  }
  return false;
}

}  // namespace rightsize
