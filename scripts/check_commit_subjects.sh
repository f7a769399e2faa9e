#!/usr/bin/env bash
# Checks the commit messages made since the rule began: a subject of at most 72 characters saying what
# changed, then (if there is a body) one blank line. The why, the test and the figures go in the body.
#
# Usage: bash scripts/check_commit_subjects.sh [REVISION_RANGE]   (default: SINCE..HEAD)
#        bash scripts/check_commit_subjects.sh --message FILE     (one message; git's # lines dropped;
#                                                                  scripts/hooks/commit-msg runs this)
# Reads the history of the repository holding the working directory (or FILE); exits 1 naming each
# offending commit, 0 when all conform.
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
# MESSAGE: what breaks the rule in it, a line each (nothing when it conforms).
problems() {
    local message=$1 subject rest
    subject=${message%%$'\n'*}
    ((${#subject} <= MAX)) || echo "subject is ${#subject} characters (at most $MAX): $subject"
    if [[ $message == *$'\n'* ]]; then
        rest=${message#*$'\n'}
        if [[ -n ${rest//[$'\n']/} && $rest != $'\n'* ]]; then
            echo "no blank line between the subject and the body"
        fi
    fi
}

if [[ ${1:-} == --message ]]; then
    [[ -f ${2:-} ]] || { echo "check_commit_subjects: --message needs a message file" >&2; exit 2; }
    said=$(problems "$(grep -v '^#' "$2" || true)")
    [[ -z $said ]] || { printf 'commit-msg: %s\n' "$said" >&2; exit 1; }
    exit 0
fi

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
    said=$(problems "$(git log -1 --format=%B "$sha")")
    if [[ -n $said ]]; then
        while IFS= read -r line; do echo "commit ${sha:0:10}: $line"; done <<<"$said"
        bad=1
    fi
done < <(git rev-list --no-merges "${range[@]}")
exit "$bad"
