#!/bin/bash
#SBATCH --job-name=typos
#SBATCH --cpus-per-task=four
#SBATCH --time=2-xx
#SBATCH --gpus=a100:two
#SBATCH --frobnicate=yes
#SBATCH mem=8G
#SBATCH --mem=lots
#SBATCH -n 2

srun ./app
