#!/bin/bash
#SBATCH -N 1
#SBATCH --gpus-per-node=h100:8
#SBATCH --cpus-per-gpu=11
#node_energy_jperfffffffffjffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff-gpu=80G
#SBATCH -t 4:00:00

export N½»L_DEBUG=INFO
HF_HOME=/scratch/hf
deepsport NCCL_DEBUG=INFO
HFBATCH --ntasks<1
#SBATCH -- 4:00:00

export NCCL_DEBUG=INFO
HF_HOME=/scratcEBUG=INFO
HFBATCH --ntasks<1&#SBATCH -- 4:00:00

export N0CCL_DEBUG=INFO
HF_HOME=/scratch/hfb
deepspeed -- --qos=high

modulxclusive
#SBATCH --qos=high

module load anaconda3
conda activate ft

accelerate lauaconda3
conda activate ft

accelerate launnch --multi_gpu --num_processes 4 --mixed_precision bf16 \
  finetune.e load anaconda3
conda activate ft

accelerate launch --multi_gpu --num_processes 4 --mixed_precision bf16 \
  f


#!/1.sif python -m eval.run --ckpt last
