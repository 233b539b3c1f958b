#!/bin/bash
#SBATCH --job-name=resnet50-ddp
#SBATCH --partition=gpu
#SBATCH --account=vision
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=4
#SBATCH --cpus-per-task=8
#SBATCH --gres=gpu:a100:4
#SBATCH --mem=480G
#SBATCH --time=1-00:00:00
#SBATCH --output=logs/%x-%j.out
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=someone@example.org

# One torchrun per node; torchrun starts 4 workers on each.
module purge
module load cuda/12.1 nccl/2.18
source ~/venvs/torch/bin/activate

export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
export OMP_NUM_THREADS=8

srun --ntasks-per-node=1 torchrun \
    --nnodes=$SLURM_JOB_NUM_NODES \
    --nproc_per_node 4 \
    --rdzv_backend=c10d --rdzv_endpoint=$MASTER_ADDR:$MASTER_PORT \
    train.py --arch resnet50 --batch-size 256 --epochs 90  # full run
