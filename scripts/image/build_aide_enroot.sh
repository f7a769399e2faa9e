#!/usr/bin/env bash
# Build the AIDE Enroot squashfs image that every trial runs in.
#
#   BUILD_DIR="${TMPDIR:-/tmp}/mle-world-build-$USER"; mkdir -p "$BUILD_DIR/rootfs"
#   ENROOT_DATA_PATH="$BUILD_DIR/rootfs" EXPORT_DIR="$BUILD_DIR" \
#     OUT_SQSH="$HOME/aide.$(uname -m).sqsh" bash scripts/image/build_aide_enroot.sh
#
# Required:
#   ENROOT_DATA_PATH  where enroot unpacks the scratch container (node-local disk)
#   EXPORT_DIR        where the image is exported before it replaces OUT_SQSH
#   OUT_SQSH          the image to write; replaced only when the whole build succeeds
# Optional:
#   BASE_IMAGE        docker://ubuntu:22.04 (default), any enroot URI, or an existing .sqsh file
#   MIN_EXPORT_GIB    free space needed in EXPORT_DIR, GiB (default 110)
#   MIN_DATA_GIB      free space needed in ENROOT_DATA_PATH, GiB (default 60)
#   SETUP_SCRIPT      recipe run inside the container as root (default image/setup.sh)
#   SOURCE_DIR        harness checkout copied into the image (default: this repository)
#   ENROOT            enroot executable (default enroot)
#   KEEP_CONTAINER=1  keep the scratch container after the build (debugging)
#   TORCH_CUDA        CUDA variant of the torch wheels: cu118, cu121, cu124, cu126, cu128, cu130 ... picks
#                     https://download.pytorch.org/whl/$TORCH_CUDA (default: PyPI's wheels, CUDA 13
#                     for torch 2.13); recorded in the manifest with the torch build that was installed
#   HOST_CA_BUNDLE    CA bundle the container trusts during the setup (default: $PIP_CERT, else
#                     $SSL_CERT_FILE, else pip's `cert` setting, else none); `none` disables it
# Passed into the container when set: proxies, TORCH_INDEX_URL, TORCH_CUDA, MLEBENCH_REPO,
# MLEBENCH_COMMIT, and pip's index-url, extra-index-url, find-links and trusted-host (from the
# environment, else from `pip config list` on the host). Behind a TLS-intercepting proxy a fresh root
# has no CA for it: HOST_CA_BUNDLE is copied in for the setup only (SSL_CERT_FILE, PIP_CERT,
# REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, GIT_SSL_CAINFO point at it) and removed before the export.
# Local package sources named by those pip settings (file:// URLs, paths) are mounted read-only at
# the same path (an index dir named `simple` together with its parent, where its files live).
#
# Reads the base image and the checkout; writes OUT_SQSH and OUT_SQSH.manifest.json (base image,
# UTC date, harness git sha, pip freeze from inside the container, sha256). A failed build leaves
# the previous OUT_SQSH untouched and removes its scratch container and temporary files.
# Exit codes: 0 built, 2 a prerequisite is missing (one line each on stderr), other: build failed.
set -Eeuo pipefail
# --help prints the header above; the script takes no arguments (its knobs are environment variables).
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    ?*) echo "build_aide_enroot.sh: unknown argument $1 (it takes none: set its environment variables, see --help)" >&2; exit 2 ;;
esac

PROG=build_aide_enroot.sh
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
REPO_ROOT="$(cd "$HERE/../.." && pwd)"

BASE_IMAGE="${BASE_IMAGE:-docker://ubuntu:22.04}"
MIN_EXPORT_GIB="${MIN_EXPORT_GIB:-110}"
MIN_DATA_GIB="${MIN_DATA_GIB:-60}"
SETUP_SCRIPT="${SETUP_SCRIPT:-$REPO_ROOT/image/setup.sh}"
SOURCE_DIR="${SOURCE_DIR:-$REPO_ROOT}"
ENROOT="${ENROOT:-enroot}"
KEEP_CONTAINER="${KEEP_CONTAINER:-0}"
TORCH_CUDA="${TORCH_CUDA:-}"
PYTHON="${PYTHON:-python3}"

# Inside the container.
IN_ROOT=/opt/mle-world
IN_SRC="$IN_ROOT/src"
IN_INFO="$IN_ROOT/build-info"
IN_SETUP="$IN_ROOT/setup.sh"
IN_CA="$IN_ROOT/host-ca.pem"
PASS_ENV=(http_proxy https_proxy no_proxy HTTP_PROXY HTTPS_PROXY NO_PROXY
    TORCH_INDEX_URL TORCH_CUDA MLEBENCH_REPO MLEBENCH_COMMIT)
# pip setting -> environment variable (the environment wins over pip's config files, as in pip)
PIP_SETTINGS=(index-url:PIP_INDEX_URL extra-index-url:PIP_EXTRA_INDEX_URL find-links:PIP_FIND_LINKS
    trusted-host:PIP_TRUSTED_HOST)

say() { printf '%s: %s\n' "$PROG" "$*" >&2; }
log() { printf '%s [%s] %s\n' "$PROG" "$(date -u +%H:%M:%S)" "$*" >&2; }

# --- prerequisites: every problem is one line on stderr, then exit 2 -----------------------------

problems=0
problem() {
    say "$*"
    problems=$((problems + 1))
}

free_gib() {
    df -Pk -- "$1" | awk 'NR == 2 { printf "%d\n", $4 / 1048576 }'
}

check_space() { # VAR DIR MIN_VAR MIN
    local var="$1" dir="$2" min_var="$3" min="$4" free
    if ! mkdir -p -- "$dir" 2>/dev/null; then
        problem "$var=$dir cannot be created"
        return
    fi
    if [[ ! -w "$dir" ]]; then
        problem "$var=$dir is not writable"
        return
    fi
    free="$(free_gib "$dir")"
    if ((free < min)); then
        problem "$var=$dir has $free GiB free, needs $min GiB (set $min_var to override)"
    fi
}

check_prerequisites() {
    local var
    for var in ENROOT_DATA_PATH EXPORT_DIR OUT_SQSH; do
        [[ -n "${!var:-}" ]] || problem "$var is not set (see the usage at the top of this script)"
    done
    command -v "$ENROOT" >/dev/null 2>&1 ||
        problem "enroot not found (install it from NVIDIA's enroot releases, or set ENROOT=/path/to/enroot)"
    command -v rsync >/dev/null 2>&1 || problem "rsync not found (install the rsync package)"
    command -v mksquashfs >/dev/null 2>&1 || problem "mksquashfs not found (install squashfs-tools)"
    command -v unsquashfs >/dev/null 2>&1 || problem "unsquashfs not found (install squashfs-tools)"
    command -v sha256sum >/dev/null 2>&1 || problem "sha256sum not found (install coreutils)"
    [[ -f "$SETUP_SCRIPT" && -r "$SETUP_SCRIPT" ]] || problem "SETUP_SCRIPT=$SETUP_SCRIPT is not a readable file"
    [[ -f "$SOURCE_DIR/pyproject.toml" ]] || problem "SOURCE_DIR=$SOURCE_DIR is not the harness checkout (no pyproject.toml)"
    for var in MIN_EXPORT_GIB MIN_DATA_GIB; do
        [[ "${!var}" =~ ^[0-9]+$ ]] || problem "$var=${!var} is not a whole number of GiB"
    done
    [[ -z "$TORCH_CUDA" || "$TORCH_CUDA" =~ ^cu[0-9]{3,4}$ ]] ||
        problem "TORCH_CUDA=$TORCH_CUDA is not a PyTorch wheel variant (cu126, cu128, cu130, ...)"
    PIP_CONFIG_CACHE="$("$PYTHON" -m pip config list 2>/dev/null || true)"
    resolve_ca_bundle
    if [[ "$BASE_IMAGE" != *://* && ! -f "$BASE_IMAGE" ]]; then
        problem "BASE_IMAGE=$BASE_IMAGE is neither an enroot URI (docker://...) nor an existing .sqsh file"
    fi
    if [[ -n "${OUT_SQSH:-}" ]]; then
        local out_dir
        out_dir="$(dirname -- "$OUT_SQSH")"
        if [[ -d "$OUT_SQSH" ]]; then
            problem "OUT_SQSH=$OUT_SQSH is a directory; name the image file"
        elif [[ ! -d "$out_dir" || ! -w "$out_dir" ]]; then
            problem "OUT_SQSH=$OUT_SQSH: directory $out_dir does not exist or is not writable"
        fi
    fi
    if ((problems == 0)); then
        check_space EXPORT_DIR "$EXPORT_DIR" MIN_EXPORT_GIB "$MIN_EXPORT_GIB"
        check_space ENROOT_DATA_PATH "$ENROOT_DATA_PATH" MIN_DATA_GIB "$MIN_DATA_GIB"
    fi
    ((problems == 0)) || exit 2
}

# The CA bundle for the setup: explicit, else what pip/OpenSSL on the host already trust.
resolve_ca_bundle() {
    CA_BUNDLE="${HOST_CA_BUNDLE:-}"
    if [[ -z "$CA_BUNDLE" ]]; then
        CA_BUNDLE="${PIP_CERT:-${SSL_CERT_FILE:-$(pip_config cert)}}"
        [[ -z "$CA_BUNDLE" || -f "$CA_BUNDLE" ]] || CA_BUNDLE="" # an implicit default may be stale
    fi
    [[ "$CA_BUNDLE" != none ]] || CA_BUNDLE=""
    if [[ -n "$CA_BUNDLE" && ! -r "$CA_BUNDLE" ]]; then
        problem "HOST_CA_BUNDLE=$CA_BUNDLE is not a readable file"
    fi
}

# The value of one pip setting (global., user. or site.) from `pip config list`, later files winning.
pip_config() {
    local key="$1" line value=""
    while IFS= read -r line; do
        [[ "$line" =~ ^[a-z]+\.${key}=\'(.*)\'$ ]] && value="${BASH_REMATCH[1]}"
    done <<<"$PIP_CONFIG_CACHE"
    printf '%s' "$value"
}

# Directories on the host that the pip settings name: file:// URLs and absolute paths.
local_sources() {
    local value item path
    for value in "$@"; do
        for item in $value; do
            case "$item" in
                file://*) path="${item#file://}" ;;
                /*) path="$item" ;;
                *) continue ;;
            esac
            path="${path%/}"
            [[ -d "$path" ]] || continue
            # a PEP 503 index dir `simple/` links to files beside it (../../files/...)
            [[ "$(basename -- "$path")" != simple ]] || path="$(dirname -- "$path")"
            printf '%s\n' "$path"
        done
    done | sort -u
}

# --- helpers ----------------------------------------------------------------------------------------

json_string() {
    local s="$1"
    s="${s//\\/\\\\}"
    s="${s//\"/\\\"}"
    s="${s//$'\t'/\\t}"
    s="${s//$'\r'/\\r}"
    s="${s//$'\n'/\\n}"
    printf '"%s"' "$s"
}

json_or_null() {
    if [[ -n "$1" ]]; then json_string "$1"; else printf 'null'; fi
}

# The first component of PATH missing under ROOT (what a mount with x-create makes), or nothing.
first_missing() {
    local root="$1" path="$2" prefix="" part
    local -a parts
    IFS=/ read -r -a parts <<<"${path#/}"
    for part in "${parts[@]}"; do
        prefix="$prefix/$part"
        [[ -e "$root$prefix" ]] || { printf '%s' "$prefix"; return; }
    done
}

first_line() {
    if [[ -f "$1" ]]; then head -n 1 -- "$1" | tr -d '\r'; fi
}

write_manifest() { # FILE SHA256 SIZE
    local file="$1" sha="$2" size="$3" git_sha="" dirty=false line sep=""
    if git -C "$SOURCE_DIR" rev-parse --git-dir >/dev/null 2>&1; then
        git_sha="$(git -C "$SOURCE_DIR" rev-parse HEAD 2>/dev/null || true)"
        [[ -z "$(git -C "$SOURCE_DIR" status --porcelain 2>/dev/null)" ]] || dirty=true
    fi
    {
        printf '{\n'
        printf '  "schema": 1,\n'
        printf '  "image": %s,\n' "$(json_string "$(basename -- "$OUT_SQSH")")"
        printf '  "sha256": %s,\n' "$(json_string "$sha")"
        printf '  "size_bytes": %s,\n' "$size"
        printf '  "base_image": %s,\n' "$(json_string "$BASE_IMAGE")"
        printf '  "built_at": %s,\n' "$(json_string "$BUILT_AT")"
        printf '  "builder": {"host": %s, "arch": %s, "enroot": %s},\n' \
            "$(json_string "$(uname -n)")" "$(json_string "$(uname -m)")" "$(json_or_null "$ENROOT_VERSION")"
        printf '  "harness": {"git_sha": %s, "dirty": %s},\n' "$(json_or_null "$git_sha")" "$dirty"
        printf '  "setup_script_sha256": %s,\n' "$(json_string "$SETUP_SHA")"
        printf '  "python": %s,\n' "$(json_or_null "$(first_line "$ROOTFS$IN_INFO/python-version.txt")")"
        printf '  "mlebench_commit": %s,\n' "$(json_or_null "$(first_line "$ROOTFS$IN_INFO/mlebench-commit.txt")")"
        local torch_version="" torch_cuda="" _word
        read -r torch_version _word torch_cuda < <(first_line "$ROOTFS$IN_INFO/torch.txt"; echo) || true
        [[ "$torch_cuda" != None ]] || torch_cuda=""
        printf '  "torch": {"version": %s, "cuda": %s, "variant": %s},\n' "$(json_or_null "$torch_version")" \
            "$(json_or_null "$torch_cuda")" "$(json_string "${TORCH_CUDA:-pypi}")"
        printf '  "packages": ['
        while IFS= read -r line || [[ -n "$line" ]]; do
            line="${line%$'\r'}"
            [[ -n "$line" ]] || continue
            printf '%s\n    %s' "$sep" "$(json_string "$line")"
            sep=","
        done <"$ROOTFS$IN_INFO/pip-freeze.txt"
        printf '\n  ]\n}\n'
    } >"$file"
}

# --- build ------------------------------------------------------------------------------------------

NAME=""
CREATED=0
WORK=""
OUT_TMP=""
ROOTFS=""

cleanup() {
    local status=$?
    trap - EXIT
    if ((CREATED)); then
        if [[ "$KEEP_CONTAINER" == 1 ]]; then
            say "kept scratch container $NAME in $ENROOT_DATA_PATH (KEEP_CONTAINER=1)"
        else
            "$ENROOT" remove -f "$NAME" >/dev/null 2>&1 || say "could not remove scratch container $NAME"
        fi
    fi
    [[ -z "$WORK" ]] || rm -rf -- "$WORK"
    [[ -z "$OUT_TMP" ]] || rm -f -- "$OUT_TMP" "$OUT_TMP.manifest"
    if ((status != 0)); then
        say "build failed (exit $status); $OUT_SQSH was left as it was"
    fi
    exit "$status"
}

main() {
    check_prerequisites
    umask 022
    trap cleanup EXIT
    trap 'exit 130' INT
    trap 'exit 143' TERM

    BUILT_AT="$(date -u +%Y-%m-%dT%H:%M:%SZ)"
    ENROOT_VERSION="$("$ENROOT" version 2>/dev/null || true)"
    ENROOT_VERSION="${ENROOT_VERSION%%$'\n'*}"
    SETUP_SHA="$(sha256sum -- "$SETUP_SCRIPT" | cut -d' ' -f1)"
    WORK="$(mktemp -d "$EXPORT_DIR/.aide-build.XXXXXX")"
    NAME="aide-build-$(date -u +%Y%m%d%H%M%S)-$$"
    ROOTFS="$ENROOT_DATA_PATH/$NAME"
    export ENROOT_DATA_PATH

    local base="$BASE_IMAGE"
    if [[ "$BASE_IMAGE" == *://* ]]; then
        log "importing $BASE_IMAGE"
        "$ENROOT" import -o "$WORK/base.sqsh" "$BASE_IMAGE" >&2
        base="$WORK/base.sqsh"
    else
        log "using base image file $BASE_IMAGE"
    fi

    log "creating scratch container $NAME"
    CREATED=1
    "$ENROOT" create -n "$NAME" "$base" >&2
    [[ -d "$ROOTFS" ]] || { say "enroot create did not unpack into $ROOTFS"; exit 1; }

    log "copying the harness source and the recipe into the container"
    mkdir -p "$ROOTFS$IN_SRC"
    if git -C "$SOURCE_DIR" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
        # what git would commit: tracked plus untracked files that .gitignore does not exclude
        git -C "$SOURCE_DIR" ls-files -z --cached --others --exclude-standard |
            rsync -a --from0 --files-from=- --ignore-missing-args "$SOURCE_DIR/" "$ROOTFS$IN_SRC/"
    else
        rsync -a \
            --exclude '.git/' --exclude '/runs/' --exclude '/build/' --exclude '/dist/' --exclude '.venv/' \
            --exclude '__pycache__/' --exclude '*.egg-info/' --exclude '.*_cache/' --exclude 'cache/' \
            --exclude '*.sqsh' "$SOURCE_DIR/" "$ROOTFS$IN_SRC/"
    fi
    install -m 0755 "$SETUP_SCRIPT" "$ROOTFS$IN_SETUP"
    rm -rf "$ROOTFS$IN_INFO"

    log "running $(basename -- "$SETUP_SCRIPT") inside the container as root"
    local -a env_args=(-e "MLE_WORLD_SRC=$IN_SRC" -e "MLE_WORLD_BUILD_INFO=$IN_INFO") mount_args=()
    local var setting value created=()
    for var in "${PASS_ENV[@]}"; do
        [[ -z "${!var+x}" ]] || env_args+=(-e "$var")
    done
    local -a pip_values=()
    for setting in "${PIP_SETTINGS[@]}"; do
        var="${setting#*:}"
        value="${!var:-$(pip_config "${setting%%:*}")}"
        [[ -n "$value" ]] || continue
        env_args+=(-e "$var=$value")
        pip_values+=("$value")
    done
    while IFS= read -r value; do
        [[ -n "$value" ]] || continue
        created+=("$(first_missing "$ROOTFS" "$value")")
        mount_args+=(-m "$value:$value:none:rbind,ro,x-create=dir")
        log "pip source $value mounted read-only for the setup"
    done < <(local_sources "${pip_values[@]}")
    if [[ -n "$CA_BUNDLE" ]]; then
        install -m 0644 "$CA_BUNDLE" "$ROOTFS$IN_CA"
        for var in SSL_CERT_FILE PIP_CERT REQUESTS_CA_BUNDLE CURL_CA_BUNDLE GIT_SSL_CAINFO; do
            env_args+=(-e "$var=$IN_CA")
        done
        log "the setup trusts the host's CA bundle $CA_BUNDLE"
    fi
    "$ENROOT" start --root --rw "${env_args[@]}" "${mount_args[@]}" "$NAME" "$IN_SETUP" >&2
    # nothing of the build host stays in the image: the CA copy and the empty mount points
    rm -f "$ROOTFS$IN_CA"
    for value in "${created[@]}"; do
        [[ -z "$value" || ! -d "$ROOTFS$value" ]] || find "$ROOTFS$value" -depth -type d -empty -delete
    done
    [[ -s "$ROOTFS$IN_INFO/pip-freeze.txt" ]] ||
        { say "the setup script did not write $IN_INFO/pip-freeze.txt inside the container"; exit 1; }

    log "exporting the container"
    "$ENROOT" export -o "$WORK/image.sqsh" "$NAME" >&2
    unsquashfs -s "$WORK/image.sqsh" >/dev/null 2>&1 ||
        { say "enroot export did not produce a squashfs image"; exit 1; }

    local sha size out_dir
    sha="$(sha256sum -- "$WORK/image.sqsh" | cut -d' ' -f1)"
    size="$(stat -c %s -- "$WORK/image.sqsh")"
    out_dir="$(dirname -- "$OUT_SQSH")"
    OUT_TMP="$(mktemp "$out_dir/.$(basename -- "$OUT_SQSH").XXXXXX")"
    log "moving the image into place ($size bytes, sha256 $sha)"
    mv -f -- "$WORK/image.sqsh" "$OUT_TMP"
    chmod 0644 -- "$OUT_TMP"
    write_manifest "$OUT_TMP.manifest" "$sha" "$size"
    chmod 0644 -- "$OUT_TMP.manifest"
    mv -f -- "$OUT_TMP" "$OUT_SQSH"
    mv -f -- "$OUT_TMP.manifest" "$OUT_SQSH.manifest.json"
    OUT_TMP=""
    log "wrote $OUT_SQSH and $OUT_SQSH.manifest.json"
    printf '%s\n' "$OUT_SQSH"
}

main "$@"
