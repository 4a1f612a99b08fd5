#!/usr/bin/env bash
# Build a local Debian bookworm base image with Python 3.11 from Debian's own packages,
# for machines that can reach a Debian mirror but no container registry:
#
#   debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm ...
#   (+ bookworm-updates/-security upgrades, docs and translations trimmed)
#   tar -C ROOTFS -c . | docker import - fedanon-base:bookworm
#
#   deploy/build-base.sh                 build the image unless it already exists
#   deploy/build-base.sh --force         rebuild it
#   deploy/build-base.sh --keep-rootfs   keep the root file system (deploy/.rootfs) for reuse
#
# Environment: BASE_IMAGE (default fedanon-base:bookworm), DEBIAN_MIRROR
# (default http://deb.debian.org/debian), DEBIAN_SECURITY_MIRROR
# (default http://deb.debian.org/debian-security), ROOTFS (default deploy/.rootfs).
#
# Needs root for debootstrap and chroot (uses sudo when not root), and a running Docker.
# Installs debootstrap with apt-get when it is missing.  Mounts made while building (/proc
# for the chroot) live in a private mount namespace and vanish with it.
# Then: docker build --build-arg BASE_IMAGE=fedanon-base:bookworm ... deploy
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
image="${BASE_IMAGE:-fedanon-base:bookworm}"
suite="bookworm"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
security_mirror="${DEBIAN_SECURITY_MIRROR:-http://deb.debian.org/debian-security}"
include="python3,python3-venv,ca-certificates"
rootfs="${ROOTFS:-$here/.rootfs}"
partial="$rootfs.partial"
# What a root file system was built from; a finished one carries this in its marker file.
recipe="suite=$suite include=$include mirror=$mirror security=$security_mirror slim=1"
marker_name=".fedanon-rootfs-complete"

force=0
keep=0
for arg in "$@"; do
    case "$arg" in
        --force) force=1 ;;
        --keep-rootfs) keep=1 ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
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
# Run as root in a mount namespace of its own: nothing it mounts is seen outside or outlives it.
as_root_private() { as_root unshare --mount --propagation private "$@"; }

command -v docker >/dev/null 2>&1 || die "docker is not installed"
docker info >/dev/null 2>&1 || die "cannot talk to the Docker daemon (docker info failed)"

if [[ "$force" -eq 0 ]] && docker image inspect "$image" >/dev/null 2>&1; then
    log "image $image already exists; reusing it (use --force to rebuild)"
    exit 0
fi

# Unmount whatever is still mounted below a folder (deepest first), e.g. by an earlier
# version of this script that was interrupted, so that the folder can be removed safely.
umount_below() {
    local dir mounts m
    dir="$(realpath -m "$1")"
    mounts="$(awk -v d="$dir" '$2 == d || index($2, d "/") == 1 { print $2 }' /proc/mounts | sort -r)"
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

staging="fedanon-base-staging:$$"
cleanup() {
    remove_tree "$partial"
    docker image rm "$staging" >/dev/null 2>&1 || true
    if [[ "$keep" -eq 0 ]]; then remove_tree "$rootfs"; fi
}
trap cleanup EXIT

if [[ "$force" -eq 0 ]] && [[ -f "$rootfs/$marker_name" ]] \
        && [[ "$(cat "$rootfs/$marker_name")" == "$recipe" ]]; then
    log "reusing the finished root file system in $rootfs"
else
    if ! command -v debootstrap >/dev/null 2>&1 && [[ ! -x /usr/sbin/debootstrap ]]; then
        command -v apt-get >/dev/null 2>&1 || die "debootstrap is missing and apt-get is not available"
        log "installing debootstrap with apt-get"
        as_root apt-get update
        as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends debootstrap
    fi
    debootstrap_bin="$(command -v debootstrap || echo /usr/sbin/debootstrap)"
    command -v unshare >/dev/null 2>&1 || die "unshare (util-linux) is missing"

    remove_tree "$partial"
    mkdir -p "$(dirname "$partial")"

    log "debootstrap --variant=minbase --include=$include $suite $partial $mirror"
    as_root_private "$debootstrap_bin" --variant=minbase --include="$include" \
        "$suite" "$partial" "$mirror"

    log "adding $suite-updates and $suite-security to the apt sources, upgrading"
    as_root tee "$partial/etc/apt/sources.list" >/dev/null <<EOF
deb $mirror $suite main
deb $mirror $suite-updates main
deb $security_mirror $suite-security main
EOF
    # shellcheck disable=SC2016  # $1 is expanded by the inner shell
    as_root_private sh -euc 'mount -t proc proc "$1/proc"
        exec chroot "$1" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin \
            DEBIAN_FRONTEND=noninteractive \
            sh -euc "apt-get update; apt-get -y upgrade; apt-get clean"' sh "$partial"

    log "trimming documentation, manual pages, translations, apt caches and lists"
    # As Debian's own slim images do: dpkg leaves these out from now on, copyrights stay.
    as_root mkdir -p "$partial/etc/dpkg/dpkg.cfg.d"
    as_root tee "$partial/etc/dpkg/dpkg.cfg.d/fedanon-slim" >/dev/null <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
    as_root find "$partial/usr/share/doc" -mindepth 1 -not -name copyright -not -type d -delete
    as_root find "$partial/usr/share/doc" -mindepth 1 -type d -empty -delete
    as_root find "$partial/usr/share/man" "$partial/usr/share/info" -mindepth 1 -delete
    as_root find "$partial/usr/share/locale" -mindepth 1 -not -name locale.alias -delete
    as_root find "$partial/var/lib/apt/lists" "$partial/var/cache/apt" "$partial/var/log" \
        -mindepth 1 -not -type d -delete

    echo "$recipe" | as_root tee "$partial/$marker_name" >/dev/null
    remove_tree "$rootfs"
    as_root mv "$partial" "$rootfs"
fi

# Import under a staging tag first: the real tag only ever names a complete, checked image.
log "importing $rootfs as $image"
as_root tar --numeric-owner --one-file-system -C "$rootfs" \
        --exclude="./$marker_name" --exclude='./proc/*' --exclude='./sys/*' -c . \
    | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["/bin/bash"]' \
        --message "debootstrap --variant=minbase --include=$include $suite" \
        - "$staging" >/dev/null

log "checking the image"
docker run --rm --network none "$staging" \
    python3 -c 'import sys, venv, ssl, ensurepip; print("python", sys.version.split()[0])' \
    || die "the new image has no working python3 with venv"
docker tag "$staging" "$image"

if [[ "$keep" -eq 1 ]]; then
    log "kept the root file system in $rootfs"
fi
docker image ls "$image"
log "done: $image"
