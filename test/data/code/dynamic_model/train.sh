#!/bin/bash
#SBATCH --gres=gpu:1
#SBATCH --cpus-per-task=4
python train.py
