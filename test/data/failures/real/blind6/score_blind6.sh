#!/bin/sh
# Score the blind6 set once (issue 26): ../score_set.sh blind6. Run from the repository root:
#   sh test/data/failures/real/blind6/score_blind6.sh [build/rightsize [--no-learned]]
exec sh "$(dirname "$0")/../score_set.sh" blind6 "$@"
