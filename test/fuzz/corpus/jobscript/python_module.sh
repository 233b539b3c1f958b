#!/bin/bash
#SBATCH --ntasks=1
#SBATCH --cpus-per-task=2
#SBATCH --mem=0
#SBATCH --time=0

set -euo pipefail
cd /project/etl && mkdir -p out
for day in 1 2 3; do
  python -m etl.daily --day "$day" >> out/etl.log
done
python - <<PY
print("done")
#SBATCH --mem=1G
PY
echo finished
