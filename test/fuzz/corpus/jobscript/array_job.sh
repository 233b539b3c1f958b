#!/bin/bash
#SBATCH --job-name=sweep
#SBATCH --array=1-10%2
#SBATCH -c 4
#SBATCH --mem 16G
#SBATCH -t 90
#SBATCH -o sweep_%A_%a.out

PARAMS=params.txt
LINE=$(sed -n "${SLURM_ARRAY_TASK_ID}p" $PARAMS)
python3 -u sweep.py --config "$LINE" --seed $SLURM_ARRAY_TASK_ID
