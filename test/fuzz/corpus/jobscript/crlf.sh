#!/bin/bash
#SBATCH --job-name=crlf
#SBATCH --ntasks=2
#SBATCH --mem=8G

srun ./solver --tol 1e-6
