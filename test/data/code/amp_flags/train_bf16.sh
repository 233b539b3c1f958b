#!/bin/bash
#SBATCH --gres=gpu:1
python train.py --d_model 256 --precision bf16 --grad_ckpt
