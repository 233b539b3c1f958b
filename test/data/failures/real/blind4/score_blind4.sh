#!/bin/sh
# Score the blind4 set once (issue 26): ../score_set.sh blind4. Run from the repository root:
#   sh test/data/failures/real/blind4/score_blind4.sh [build/rightsize [--no-learned]]
exec sh "$(dirname "$0")/../score_set.sh" blind4 "$@"
