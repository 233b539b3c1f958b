#!/bin/bash
#SBATCH --nodes=2-4
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:v100:2,shard:1
#SBATCH --gpus-per-task=1
#SBATCH --mem=64G --cpus-per-task=6   # two options on one line
#SBATCH --array=0-15:4,100
#SBATCH --part=gpu

mpiexec -n 8 -x LD_LIBRARY_PATH python3 -O solver.py --mesh big.msh
