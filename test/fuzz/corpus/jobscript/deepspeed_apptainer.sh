#!/bin/bash
#SBATCH -N 1
#SBATCH --gpus-per-node=h100:8
#SBATCH --cpus-per-gpu=12
#SBATCH --mem-per-gpu=80G
#SBATCH -t 4:00:00

export NCCL_DEBUG=INFO
HF_HOME=/scratch/hf
deepspeed --num_gpus 8 pretrain.py --deepspeed ds_config.json --zero-stage 3
srun apptainer exec --nv -B /scratch:/scratch pytorch_24.01.sif python -m eval.run --ckpt last
