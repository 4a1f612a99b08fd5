#!/usr/bin/env bash
# Build a local Debian bookworm base image with Python 3.11 from Debian's own packages,
# for machines that can reach a Debian mirror but no container registry.
#
#   deploy/build-base.sh            build fedanon-base:bookworm unless it already exists
#   deploy/build-base.sh --force    rebuild the root file system and the image
#   deploy/build-base.sh --clean    also delete the root file system folder afterwards
#
# Environment: BASE_IMAGE (default fedanon-base:bookworm), DEBIAN_MIRROR
# (default http://deb.debian.org/debian), DEBIAN_SECURITY_MIRROR
# (default http://deb.debian.org/debian-security), ROOTFS (default deploy/.rootfs).
#
# Needs root for debootstrap and chroot (uses sudo when not root) and a running Docker.
# The image is then used with: docker build --build-arg BASE_IMAGE=fedanon-base:bookworm ...
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
image="${BASE_IMAGE:-fedanon-base:bookworm}"
suite="bookworm"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
include="python3,python3-venv,ca-certificates"
rootfs="${ROOTFS:-$here/.rootfs}"
# What the root file system was built from; a finished one carries this in its marker file.
recipe="suite=$suite include=$include mirror=$mirror"
marker="$rootfs/.fedanon-rootfs-complete"

force=0
clean=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --clean) clean=1 ;;
        -h|--help) sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-base: unknown argument: $arg (try --help)" >&2; exit 2 ;;
    esac
done

log() { printf 'build-base: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

sudo_cmd=()
if [[ "$(id -u)" -ne 0 ]]; then
    command -v sudo >/dev/null 2>&1 || die "debootstrap needs root: run as root or install sudo"
    sudo_cmd=(sudo)
fi
as_root() { "${sudo_cmd[@]}" "$@"; }

command -v docker >/dev/null 2>&1 || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot talk to the Docker daemon (docker info failed)"

if [[ "$force" -eq 0 ]] && docker image inspect "$image" >/dev/null 2>&1; then
    log "image $image already exists; reusing it (use --force to rebuild)"
    exit 0
fi

# Unmount whatever is still mounted below a folder (deepest first), e.g. /proc left behind
# by an interrupted debootstrap or chroot, so that it can be removed safely.
umount_below() {
    local dir
    dir="$(realpath -m "$1")"
    local mounts
    mounts="$(awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r)"
    local m
    for m in $mounts; do
        log "unmounting $m"
        as_root umount -l "$m" || true
    done
}

remove_tree() {
    [[ -e "$1" ]] || return 0
    umount_below "$1"
    as_root rm -rf --one-file-system "$1"
}

if [[ "$force" -eq 1 ]] || [[ ! -f "$marker" ]] || [[ "$(cat "$marker")" != "$recipe" ]]; then
    if ! command -v debootstrap >/dev/null 2>&1 && [[ ! -x /usr/sbin/debootstrap ]]; then
        command -v apt-get >/dev/null 2>&1 || die "debootstrap is missing and apt-get is not available"
        log "installing debootstrap with apt-get"
        as_root apt-get update
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
    fi
    debootstrap_bin="$(command -v debootstrap || echo /usr/sbin/debootstrap)"

    partial="$rootfs.partial"
    cleanup() { remove_tree "$partial"; }
    trap cleanup EXIT
    remove_tree "$partial"
    mkdir -p "$(dirname "$partial")"

    log "debootstrap --variant=minbase --include=$include $suite $partial $mirror"
    as_root "$debootstrap_bin" --variant=minbase --include="$include" "$suite" "$partial" "$mirror"

    log "adding $suite-updates and $suite-security to the image's apt sources and upgrading"
    as_root tee "$partial/etc/apt/sources.list" >/dev/null <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
    as_root mount -t proc proc "$partial/proc"
    as_root chroot "$partial" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
        DEBIAN_FRONTEND=noninteractive sh -c 'apt-get update && apt-get -y upgrade && apt-get clean'
    as_root umount "$partial/proc"

    log "trimming apt caches and lists"
    as_root sh -c "rm -rf '$partial'/var/lib/apt/lists/* '$partial'/var/cache/apt/*.bin \
        '$partial'/var/cache/apt/archives/*.deb '$partial'/var/log/*.log '$partial'/var/log/apt/*"

    echo "$recipe" | as_root tee "$partial/.fedanon-rootfs-complete" >/dev/null
    remove_tree "$rootfs"
    as_root mv "$partial" "$rootfs"
    trap - EXIT
else
    log "reusing the finished root file system in $rootfs"
fi

log "importing $rootfs as $image"
as_root tar --numeric-owner --exclude=./.fedanon-rootfs-complete -C "$rootfs" -c . \
    | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        --message "debootstrap --variant=minbase --include=$include $suite" \
        - "$image" >/dev/null

log "checking the image"
docker run --rm "$image" python3 -c 'import sys, venv, ssl; print("python", sys.version.split()[0])' \
    || die "the new image $image has no working python3"

if [[ "$clean" -eq 1 ]]; then
    log "removing $rootfs"
    remove_tree "$rootfs"
fi

docker image ls "$image"
log "done: $image"
