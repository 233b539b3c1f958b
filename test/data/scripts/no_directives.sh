#!/bin/bash
# Everything comes from the command line: sbatch -c 8 --mem=32G -t 2:00:00 no_directives.sh
./bin/simulate --steps 1000
