#!/bin/sh
# Score the blind7 set once (issue 26): ../score_set.sh blind7. Run from the repository root:
#   sh test/data/failures/real/blind7/score_blind7.sh [build/rightsize [--no-learned]]
exec sh "$(dirname "$0")/../score_set.sh" blind7 "$@"
