#!/bin/sh
# Stand-in for image/setup.sh in the build tests: runs inside the busybox base container.
# Reads the copied-in source; writes /opt/mle-world/setup-ran and the build-info files.
set -eu
: "${MLE_WORLD_SRC:?}" "${MLE_WORLD_BUILD_INFO:?}"
# Only the test base has this os-release, so this proves / is the container's rootfs.
grep -q '^ID=testbase' /etc/os-release
test -f "$MLE_WORLD_SRC/pyproject.toml"
test -f "$MLE_WORLD_SRC/image/setup.sh"
mkdir -p "$MLE_WORLD_BUILD_INFO"
printf 'pid=%s user=%s\n' "$$" "$(id -u)" >/opt/mle-world/setup-ran
printf 'numpy==1.26.4\nmle-world @ file://%s\ntorch==2.5.1+cu124\n' "$MLE_WORLD_SRC" \
    >"$MLE_WORLD_BUILD_INFO/pip-freeze.txt"
printf 'Python 3.11.test\n' >"$MLE_WORLD_BUILD_INFO/python-version.txt"
printf '0123456789abcdef\n' >"$MLE_WORLD_BUILD_INFO/mlebench-commit.txt"
printf '2.5.1+cu124 cuda 12.4\n' >"$MLE_WORLD_BUILD_INFO/torch.txt"
echo "setup done"
