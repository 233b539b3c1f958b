#!/bin/bash
#SBATCH --job-name=resnet50
#SBATCH --gres=gpu:v100:1
#SBATCH --cpus-per-task=10
#SBATCH --time=12:00:00
srun python train.py --data /scratch/imagenet
