#!/usr/bin/env bash
# Checks the commit messages made since the rule began: a subject of at most 72 characters saying what
# changed, then (if there is a body) one blank line. The why, the test and the figures go in the body.
#
# Usage: bash scripts/check_commit_subjects.sh [REVISION_RANGE]   (default: SINCE..HEAD)
# Reads the history of the repository holding the working directory; exits 1 naming each offending
# commit, 0 when all conform.
set -euo pipefail
# --help prints the header above.
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
esac

# The last commit made before CONTRIBUTING.md set the rule; its ancestors keep their paragraph subjects.
SINCE=799617446d19d49efa360962c38db083c45326ce
MAX=72
# Merged before the check ran on their branch; history on main is not rewritten.
EXEMPT=(5c15186ddba67ac024938b6c1e75f32057944c29)
range=("$@")
if ((${#range[@]} == 0)); then
    if git rev-parse -q --verify "$SINCE^{commit}" >/dev/null; then
        range=("$SINCE..HEAD")
    else
        # A shallow clone without the rule's first commit: its older commits may predate the rule.
        range=(--max-count=1 HEAD)
        echo "check_commit_subjects: ${SINCE:0:10} is not in this clone; checking the newest commit only" >&2
    fi
fi

bad=0
while IFS= read -r sha; do
    [[ " ${EXEMPT[*]} " == *" $sha "* ]] && continue
    message=$(git log -1 --format=%B "$sha")
    subject=${message%%$'\n'*}
    if ((${#subject} > MAX)); then
        echo "commit ${sha:0:10}: subject is ${#subject} characters (at most $MAX): $subject"
        bad=1
    fi
    if [[ $message == *$'\n'* ]]; then
        rest=${message#*$'\n'}
        if [[ -n ${rest//[$'\n']/} && $rest != $'\n'* ]]; then
            echo "commit ${sha:0:10}: no blank line between the subject and the body"
            bad=1
        fi
    fi
done < <(git rev-list --no-merges "${range[@]}")
exit "$bad"
