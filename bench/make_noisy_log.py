#!/usr/bin/env python3
"""Writes a noisy training log of about SIZE_MB megabytes that ends in a failure.

The body mixes what long jobs print: per-step loss lines, tqdm progress bars updated with
carriage returns, NCCL INFO lines from several ranks, Python warnings and ANSI-coloured
logger lines. The last lines are a PyTorch CUDA OOM traceback followed by NCCL watchdog
timeouts on the other ranks (the diagnosis must name gpu_oom). Deterministic (fixed seed).
Usage: make_noisy_log.py OUT SIZE_MB
"""
import random
import sys

out, size_mb = sys.argv[1], int(sys.argv[2])
rng = random.Random(42)
target = size_mb * 1024 * 1024
chunk = []
written = 0
step = 0
with open(out, "w") as f:
    while written < target:
        step += 1
        r = rng.random()
        if r < 0.55:
            line = (f"[2024-05-01 10:{step // 60 % 60:02d}:{step % 60:02d}] step {step} "
                    f"loss={rng.uniform(0.5, 3):.4f} lr={3e-4:.2e} grad_norm={rng.uniform(0, 5):.3f} "
                    f"tokens/s={rng.randint(90000, 120000)}\n")
        elif r < 0.75:
            done = step % 1000
            bar = "".join(f"\rEpoch {step // 1000}: {d // 10:3d}%|{'#' * (d // 100):10s}| "
                          f"{d}/1000 [00:{d // 60:02d}<01:00, 8.1it/s, loss={rng.uniform(0.5, 3):.3f}]"
                          for d in range(done, min(done + 5, 1000)))
            line = bar + "\n"
        elif r < 0.9:
            line = (f"gpu{rng.randint(0, 31):03d}:{rng.randint(1000, 9999)}:{rng.randint(1000, 9999)} "
                    f"[{rng.randint(0, 7)}] NCCL INFO Channel {rng.randint(0, 31):02d}/0 : "
                    f"{rng.randint(0, 7)}[{rng.randint(0, 7)}] -> {rng.randint(0, 7)}[{rng.randint(0, 7)}] "
                    f"via P2P/IPC/read\n")
        elif r < 0.97:
            line = ("/opt/conda/lib/python3.10/site-packages/torch/utils/checkpoint.py:429: "
                    "UserWarning: torch.utils.checkpoint: please pass in use_reentrant=True or "
                    "use_reentrant=False explicitly.\n")
        else:
            line = (f"\x1b[32m2024-05-01 10:00:00\x1b[0m | \x1b[1mINFO\x1b[0m | trainer:log:{step} - "
                    f"eval accuracy {rng.uniform(0.5, 0.9):.4f} perplexity {rng.uniform(5, 20):.2f}\n")
        chunk.append(line)
        written += len(line)
        if len(chunk) >= 10000:
            f.write("".join(chunk))
            chunk = []
    f.write("".join(chunk))
    f.write('Traceback (most recent call last):\n'
            '  File "/home/alice/llm/train.py", line 212, in <module>\n'
            '    main()\n'
            '  File "/home/alice/llm/train.py", line 187, in main\n'
            '    loss = model(batch).loss\n'
            '  File "/opt/conda/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1518, in _wrapped_call_impl\n'
            '    return self._call_impl(*args, **kwargs)\n'
            'torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.95 GiB. GPU 3 has a '
            'total capacity of 79.10 GiB of which 1.02 GiB is free. Including non-PyTorch memory, '
            'this process has 78.07 GiB memory in use. Of the allocated memory 74.12 GiB is '
            'allocated by PyTorch, and 2.41 GiB is reserved by PyTorch but unallocated. If reserved '
            'but unallocated memory is large try setting PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True '
            'to avoid fragmentation.\n')
    for rank in range(8):
        if rank != 3:
            f.write(f"[rank{rank}]:[E ProcessGroupNCCL.cpp:563] [Rank {rank}] Watchdog caught "
                    "collective operation timeout: WorkNCCL(SeqNum=88412, OpType=ALLREDUCE, "
                    "NumelIn=1, NumelOut=1, Timeout(ms)=600000) ran for 600114 milliseconds before "
                    "timing out.\n")
