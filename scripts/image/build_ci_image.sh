#!/usr/bin/env bash
# The CI-sized AIDE image, built by the real scripts/image/build_aide_enroot.sh with the real Enroot:
# a Debian minbase (debootstrap, squashed) as BASE_IMAGE and image/ci/setup.sh as SETUP_SCRIPT.
#
# Usage (as root):  bash scripts/image/build_ci_image.sh      prints the image path on stdout
#
# Reads the checkout (image/ci/setup.sh, pyproject.toml, src/); writes under the cache dir:
#   base-KEY.sqsh              debootstrap --variant=minbase of $SUITE plus $BASE_PACKAGES
#   aide-ci-KEY.sqsh(.manifest.json)   the image; KEY hashes the base, the recipe and the harness
# Both are reused while their inputs are unchanged, so a second run takes about a second. Builds are
# serialised with a lock in the cache dir (several test sessions may ask at once); older images
# beyond the newest $KEEP are deleted.
#
# Environment (all optional):
#   MLEW_IMAGE_CACHE   cache dir (default ${XDG_CACHE_HOME:-~/.cache}/mle-world/images)
#   DEBIAN_MIRROR      debootstrap mirror (http://deb.debian.org/debian)
#   MLEW_IMAGE_KEEP    images kept in the cache (6)
# Exit codes: 0 built or cached, 2 a prerequisite is missing (one line), other: build failed.
set -Eeuo pipefail
# --help prints the header above; the script takes no arguments (its knobs are environment variables).
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    ?*) echo "build_ci_image.sh: unknown argument $1 (it takes none: set its environment variables, see --help)" >&2; exit 2 ;;
esac

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
CACHE="${MLEW_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/mle-world/images}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
KEEP="${MLEW_IMAGE_KEEP:-6}"
SUITE=bookworm
# python3-venv: the recipe makes /opt/venv; bubblewrap: the agent's inner sandbox for generated code.
BASE_PACKAGES=python3,python3-venv,ca-certificates,bubblewrap
SETUP="$REPO/image/ci/setup.sh"
# zstd data compression keeps the image small; squashfuse and unsquashfs on Debian 12 read it.
SQUASH_OPTIONS="-comp zstd -Xcompression-level 3 -exit-on-error"

say() { printf 'build_ci_image: %s\n' "$*" >&2; }
die() {
    say "$1"
    exit "${2:-1}"
}

[[ "$(id -u)" == 0 ]] || die "must run as root (debootstrap and enroot create need it)" 2
command -v enroot >/dev/null || die "enroot not found (run scripts/install_runtimes.sh)" 2
command -v debootstrap >/dev/null || die "debootstrap not found (apt-get install debootstrap)" 2
command -v mksquashfs >/dev/null || die "mksquashfs not found (apt-get install squashfs-tools)" 2
mkdir -p "$CACHE"

hash_text() { sha256sum | cut -c1-16; }

# Content hash of what the image installs from the checkout (tracked and untracked, not ignored).
harness_hash() {
    git -C "$REPO" ls-files -z --cached --others --exclude-standard -- pyproject.toml src |
        sort -z | (cd "$REPO" && xargs -0 -r sha256sum) | hash_text
}

build_base() { # OUT
    local out="$1" root
    root="$(mktemp -d "$CACHE/.base.XXXXXX")"
    say "debootstrap --variant=minbase $SUITE (+ $BASE_PACKAGES) from $MIRROR"
    if ! debootstrap --variant=minbase --include="$BASE_PACKAGES" "$SUITE" "$root" "$MIRROR" \
        >"$CACHE/debootstrap.log" 2>&1; then
        rm -rf "$root"
        die "debootstrap failed, see $CACHE/debootstrap.log"
    fi
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
    # shellcheck disable=SC2086  # options are words
    mksquashfs "$root" "$out.tmp" -all-root -noappend -quiet $SQUASH_OPTIONS >/dev/null
    rm -rf "$root"
    mv -f "$out.tmp" "$out"
}

main() {
    local t0=$SECONDS base_key key base image
    base_key="$(printf '%s\n' "$SUITE" "$MIRROR" "$BASE_PACKAGES" "$SQUASH_OPTIONS" | hash_text)"
    base="$CACHE/base-$base_key.sqsh"
    key="$(printf '%s\n' "$base_key" "$(sha256sum <"$SETUP")" "$(harness_hash)" \
        "$(sha256sum <"$REPO/scripts/image/build_aide_enroot.sh")" | hash_text)"
    image="$CACHE/aide-ci-$key.sqsh"

    exec 9>"$CACHE/.lock"
    flock 9
    if [[ -f "$image" && -f "$image.manifest.json" ]]; then
        touch "$image" "$image.manifest.json"
        say "cached $image"
        printf '%s\n' "$image"
        return 0
    fi
    if [[ ! -f "$base" ]]; then
        build_base "$base"
        say "base image $base ($(du -m "$base" | cut -f1) MB) in $((SECONDS - t0)) s"
    fi
    local t1=$SECONDS work
    work="$(mktemp -d "$CACHE/.build.XXXXXX")"
    # shellcheck disable=SC2064  # expand now: the path is fixed
    trap "rm -rf '$work'" EXIT
    mkdir -p "$work/data" "$work/export"
    ENROOT_DATA_PATH="$work/data" EXPORT_DIR="$work/export" OUT_SQSH="$image" BASE_IMAGE="$base" \
        SETUP_SCRIPT="$SETUP" MIN_EXPORT_GIB=1 MIN_DATA_GIB=1 ENROOT_SQUASH_OPTIONS="$SQUASH_OPTIONS" \
        bash "$REPO/scripts/image/build_aide_enroot.sh" >/dev/null
    say "image $image ($(du -m "$image" | cut -f1) MB) in $((SECONDS - t1)) s"
    # keep the newest images: other checkouts (worktrees, older commits) may still use them
    find "$CACHE" -maxdepth 1 -name 'aide-ci-*.sqsh' -printf '%T@ %p\n' | sort -rn | tail -n +"$((KEEP + 1))" |
        cut -d' ' -f2- | while IFS= read -r old; do rm -f "$old" "$old.manifest.json"; done
    printf '%s\n' "$image"
}

main
