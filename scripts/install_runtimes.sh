#!/usr/bin/env bash
# Builds and installs the real NVIDIA Enroot and pyxis from the vendored upstream sources, for the
# project's own tests (clusters keep their own installation; docs/image-and-servers.md says how to check it).
#
# Reads $MLEW_VENDOR_DIR (default: ../shared/vendor beside the checkout) holding
# enroot-*.tar.gz and pyxis-*.tar.gz; writes /usr/local/bin/enroot*, /usr/local/etc/enroot,
# /usr/local/lib/enroot, /usr/local/lib/slurm/spank_pyxis.so and a build dir under ${TMPDIR:-/tmp}.
# A second run is a no-op when `enroot version` and the plugin already match the vendored versions.
#
# Usage (as root, Debian 12):  bash scripts/install_runtimes.sh [--force | --check]
#   --force  rebuild even when the prefix already has the vendored versions
#   --check  build nothing: exit 0 when the prefix has them, 1 when it does not
# Environment: MLEW_VENDOR_DIR, MLEW_RUNTIMES_PREFIX (/usr/local), MLEW_RUNTIMES_INSTALL (1 = apt-get
# install missing Debian packages).
set -euo pipefail
# --help prints the header above; its one argument is --force or --check (its knobs are environment variables).
case ${1:-} in
    -h | --help) awk 'NR > 1 && !/^#/ { exit } NR > 1 { sub(/^# ?/, ""); print }' "${BASH_SOURCE[0]}"; exit 0 ;;
    --force | --check | "") ;;
    *) echo "install_runtimes.sh: unknown argument $1 (it takes none but --force or --check: set its environment variables, see --help)" >&2; exit 2 ;;
esac
((${#} <= 1)) || { echo "install_runtimes.sh: one argument at most (got $#)" >&2; exit 2; }

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENDOR="${MLEW_VENDOR_DIR:-$REPO/../shared/vendor}"
PREFIX="${MLEW_RUNTIMES_PREFIX:-/usr/local}"
INSTALL="${MLEW_RUNTIMES_INSTALL:-1}"
FORCE=0
[[ "${1:-}" == --force ]] && FORCE=1
CHECK=0
[[ "${1:-}" == --check ]] && CHECK=1

# Build: libbsd-dev (strlcpy for glibc), makeself, libslurm-dev (spank.h). Run: squashfs-tools (create,
# export), squashfuse + fuse-overlayfs (start IMAGE.sqsh), and enroot's own package dependencies.
PACKAGES=(gcc make libc6-dev libbsd-dev makeself libslurm-dev squashfs-tools squashfuse fuse-overlayfs
    jq parallel zstd pigz curl bsdmainutils passwd)

say() { printf 'install_runtimes: %s\n' "$*" >&2; }
die() {
    say "$1"
    exit "${2:-1}"
}

[[ "$(id -u)" == 0 ]] || die "must run as root (it installs into $PREFIX)" 2
[[ -d "$VENDOR" ]] || die "no vendored sources at $VENDOR (expected ../shared/vendor beside the checkout, or set MLEW_VENDOR_DIR)" 2
shopt -s nullglob
enroot_tars=("$VENDOR"/enroot-*.tar.gz)
pyxis_tars=("$VENDOR"/pyxis-*.tar.gz)
shopt -u nullglob
((${#enroot_tars[@]} == 1)) || die "expected one enroot-*.tar.gz in $VENDOR, found ${#enroot_tars[@]}" 2
((${#pyxis_tars[@]} == 1)) || die "expected one pyxis-*.tar.gz in $VENDOR, found ${#pyxis_tars[@]}" 2
ENROOT_TAR="${enroot_tars[0]}"
PYXIS_TAR="${pyxis_tars[0]}"
ENROOT_VERSION="$(basename "$ENROOT_TAR" | sed -E 's/^enroot-([0-9.]+)-.*/\1/')"
PYXIS_VERSION="$(basename "$PYXIS_TAR" | sed -E 's/^pyxis-([0-9.]+)-.*/\1/')"
PLUGIN="$PREFIX/lib/slurm/spank_pyxis.so"
PYXIS_STAMP="$PREFIX/lib/slurm/spank_pyxis.version"

BUILD_LOG=""
quiet() { # run a build command with its (warning-heavy) output in BUILD_LOG, shown only on failure
    if ! "$@" >>"$BUILD_LOG" 2>&1; then
        tail -n 20 "$BUILD_LOG" >&2
        die "failed: $* (full log: $BUILD_LOG)"
    fi
}

install_packages() {
    local missing=() pkg
    for pkg in "${PACKAGES[@]}"; do
        [[ "$(dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null)" == 'install ok installed' ]] || missing+=("$pkg")
    done
    ((${#missing[@]})) || return 0
    [[ "$INSTALL" == 1 ]] || die "missing Debian packages: ${missing[*]} (set MLEW_RUNTIMES_INSTALL=1)" 2
    say "apt-get install ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null 2>&1; then
        apt-get update -qq
        apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
    fi
}

# The prefix's own enroot, not the first on PATH: a build into a temporary prefix (MLEW_RUNTIMES_PREFIX)
# must not be skipped because /usr/local already has one.
ENROOT_BIN="$PREFIX/bin/enroot"
enroot_current() {
    [[ "$FORCE" == 0 && -x "$ENROOT_BIN" ]] && [[ "$("$ENROOT_BIN" version 2>/dev/null)" == "$ENROOT_VERSION" ]]
}

pyxis_current() {
    [[ "$FORCE" == 0 && -f "$PLUGIN" && -f "$PYXIS_STAMP" ]] &&
        [[ "$(<"$PYXIS_STAMP")" == "$(sha256sum "$PYXIS_TAR" | cut -d' ' -f1)" ]]
}

build_enroot() {
    local src="$1/enroot"
    mkdir -p "$src"
    tar -xzf "$ENROOT_TAR" -C "$src" --strip-components=1
    # The archive has no submodules (musl, linux-headers, makeself): build the utilities against glibc,
    # take makeself from Debian, and skip the top-level `deps` target (git submodule update + musl).
    quiet make -C "$src/deps" FORCE_GLIBC=1 libbsd
    mkdir -p "$src/deps/dist/linux/include" "$src/deps/dist/makeself/bin"
    ln -sf "$(command -v makeself)" "$src/deps/dist/makeself/bin/enroot-makeself"
    touch "$src/deps/makeself/.stamp" "$src/deps/linux-headers/.stamp"
    # glibc 2.36 has no strlcpy/strlcat: link Debian's shared libbsd after the in-tree static one.
    # All of dpkg's list, then its first match: `dpkg -L | grep -m1` killed dpkg with SIGPIPE once grep
    # left (pipefail: the build exited 141 in about 1 run in 8).
    local libbsd
    libbsd="$(dpkg -L libbsd-dev | grep '/libbsd\.so$')" || die "libbsd-dev lists no libbsd.so"
    libbsd="${libbsd%%$'\n'*}"
    local -a args=(FORCE_GLIBC=1 "prefix=$PREFIX" "LDLIBS=-l:libbsd.a $libbsd")
    quiet make -C "$src" -o deps "${args[@]}"
    quiet make -C "$src" -o deps "${args[@]}" install
    mkdir -p /run/enroot
    [[ "$("$ENROOT_BIN" version)" == "$ENROOT_VERSION" ]] || die "$ENROOT_BIN does not report version $ENROOT_VERSION"
}

build_pyxis() {
    local src="$1/pyxis"
    mkdir -p "$src"
    tar -xzf "$PYXIS_TAR" -C "$src" --strip-components=1
    quiet make -C "$src" "prefix=$PREFIX"
    quiet make -C "$src" "prefix=$PREFIX" install
    sha256sum "$PYXIS_TAR" | cut -d' ' -f1 >"$PYXIS_STAMP"
}

main() {
    local t0=$SECONDS
    if enroot_current && pyxis_current; then
        say "enroot $ENROOT_VERSION and pyxis $PYXIS_VERSION already installed ($PLUGIN)"
        return 0
    fi
    ((CHECK == 0)) || { say "enroot $ENROOT_VERSION or pyxis $PYXIS_VERSION missing or outdated in $PREFIX"; return 1; }
    install_packages
    local work
    work="$(mktemp -d "${TMPDIR:-/tmp}/mlew-runtimes.XXXXXX")"
    # shellcheck disable=SC2064  # expand now: the path is fixed
    trap "rm -rf '$work'" EXIT
    BUILD_LOG="${TMPDIR:-/tmp}/mlew-runtimes-build.log"
    : >"$BUILD_LOG"
    if ! enroot_current; then
        say "building enroot $ENROOT_VERSION from $(basename "$ENROOT_TAR")"
        build_enroot "$work"
    fi
    if ! pyxis_current; then
        say "building pyxis $PYXIS_VERSION from $(basename "$PYXIS_TAR")"
        build_pyxis "$work"
    fi
    say "enroot $("$ENROOT_BIN" version) and pyxis $PYXIS_VERSION ($PLUGIN) built from scratch and installed in $PREFIX in $((SECONDS - t0)) s"
}

main
