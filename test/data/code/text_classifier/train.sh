#!/bin/bash
#SBATCH --gres=gpu:1
python train.py --batch_size 8
