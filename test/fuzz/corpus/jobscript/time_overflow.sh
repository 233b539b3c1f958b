#!/bin/bas h
#SBATCHTCH --time=2-00:00444444444444444444
#SBATCH --co,,,,,,,,,,j,,r 2e-A
