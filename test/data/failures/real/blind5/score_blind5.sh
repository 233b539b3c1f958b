#!/bin/sh
# Score the blind5 set once (issue 26): ../score_set.sh blind5. Run from the repository root:
#   sh test/data/failures/real/blind5/score_blind5.sh [build/rightsize [--no-learned]]
exec sh "$(dirname "$0")/../score_set.sh" blind5 "$@"
