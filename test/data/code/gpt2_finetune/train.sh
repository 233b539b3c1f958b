#!/bin/bash
#SBATCH --job-name=gpt2-ft
#SBATCH --gres=gpu:a100:4
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --time=04:00:00
module load cuda/12.1
python train.py --config config.yaml --batch_size 16
