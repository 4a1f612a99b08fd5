#!/usr/bin/env bash
# Build the wheels the Docker image installs from (no index is used inside `docker build`):
#   * fedanon itself, from a clean copy of this repository's working tree (or of a commit);
#   * every dependency, as binary wheels for Linux x86_64 / CPython 3.11.
# They land in deploy/wheels/ (git-ignored).
#
#   deploy/build-wheels.sh          build/refresh the wheels
#   deploy/build-wheels.sh --clean  empty deploy/wheels/ first
#   deploy/build-wheels.sh --ref HEAD   fedanon as committed (git archive), not the work tree
#                                       (FEDANON_REF=HEAD does the same, e.g. for compose-demo.sh)
#
# Environment: PYTHON (a Python >= 3.11 with pip; default: the repository's .venv if it
# has one, else python3), WHEEL_GLIBC (newest glibc the wheels may need, default 2.36 as in
# Debian bookworm; every older manylinux tag is accepted too), PIP_CONSTRAINT (optional
# pins, honoured by pip as usual).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/.." && pwd)"
wheels="$here/wheels"
glibc="${WHEEL_GLIBC:-2.36}"

clean=0
ref="${FEDANON_REF:-}"
while [[ $# -gt 0 ]]; do
    case "$1" in
        --clean) clean=1 ;;
        --ref) [[ $# -ge 2 ]] || { echo "build-wheels: --ref needs a commit" >&2; exit 2; }
            ref="$2"; shift ;;
        -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
        *) echo "build-wheels: unknown argument: $1 (try --help)" >&2; exit 2 ;;
    esac
    shift
done

log() { printf 'build-wheels: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

if [[ -n "${PYTHON:-}" ]]; then
    python="$PYTHON"
elif [[ -x "$repo/.venv/bin/python" ]]; then
    python="$repo/.venv/bin/python"
else
    python="python3"
fi
command -v "$python" >/dev/null 2>&1 || die "no Python found ($python); set PYTHON"
"$python" -m pip --version >/dev/null 2>&1 || die "$python has no pip; set PYTHON to a Python with pip"
log "using $("$python" --version 2>&1) at $(command -v "$python")"

if [[ "$clean" -eq 1 ]]; then
    log "emptying $wheels"
    rm -rf "$wheels"
fi
mkdir -p "$wheels"

# Build from a clean copy: an in-tree build would leave build/ behind and could ship
# stale modules from an earlier build.
src="$(mktemp -d)"
trap 'rm -rf "$src" "$src.log"' EXIT
if [[ -n "$ref" ]]; then
    log "source: commit $(git -C "$repo" rev-parse --short "$ref^{commit}") ($ref)"
    git -C "$repo" archive "$ref" | tar -x -C "$src"
else
    log "source: the working tree of $repo"
    for f in pyproject.toml setup.cfg setup.py MANIFEST.in README.md README.rst LICENSE LICENSE.txt NOTICE; do
        if [[ -e "$repo/$f" ]]; then cp "$repo/$f" "$src/"; fi
    done
    for d in common party leader examples; do
        [[ -d "$repo/$d" ]] || die "package folder $d/ is missing in $repo"
        cp -r "$repo/$d" "$src/"
    done
fi
find "$src" \( -name __pycache__ -o -name '*.egg-info' \) -prune -exec rm -rf {} +

log "pip wheel fedanon -> $wheels"
rm -f "$wheels"/fedanon-*.whl
# Same source, same wheel, byte for byte (fixed timestamps in the zip): docker build's
# cache then sees nothing new and the image is not rebuilt.
export SOURCE_DATE_EPOCH="${SOURCE_DATE_EPOCH:-315532800}"
# The build backend is chatty even with -q: show its output only when it fails.
build_log="$src.log"
if ! "$python" -m pip wheel --no-deps --disable-pip-version-check -q -w "$wheels" "$src" \
        >"$build_log" 2>&1; then
    cat "$build_log" >&2
    die "building the fedanon wheel failed"
fi
fedanon_wheel="$(ls "$wheels"/fedanon-*.whl)"
log "built $(basename "$fedanon_wheel")"

# pip does not widen manylinux_X_Y tags by itself: name every tag glibc $glibc runs.
[[ "$glibc" =~ ^2\.([0-9]+)$ ]] || die "WHEEL_GLIBC must look like 2.36, not $glibc"
platforms=()
for ((minor = BASH_REMATCH[1]; minor >= 5; minor--)); do
    platforms+=(--platform "manylinux_2_${minor}_x86_64")
done
platforms+=(--platform manylinux2014_x86_64 --platform manylinux2010_x86_64 --platform manylinux1_x86_64)

log "pip download dependencies for Linux x86_64 (glibc <= $glibc), CPython 3.11"
if ! "$python" -m pip download --disable-pip-version-check -q \
        --only-binary=:all: "${platforms[@]}" --python-version 3.11 \
        --implementation cp --abi cp311 \
        -d "$wheels" "$fedanon_wheel"; then
    # A dependency without a suitable binary wheel: build the wheels on this machine,
    # which only fits the image when this machine is itself Linux x86_64 with CPython 3.11.
    host_tag="$("$python" -c 'import platform, sys; print(sys.platform, platform.machine(), sys.implementation.name, *sys.version_info[:2])')"
    [[ "$host_tag" == "linux x86_64 cpython 3 11" ]] \
        || die "some dependency has no binary wheel for glibc $glibc and this machine ($host_tag) cannot build one that fits"
    log "falling back to pip wheel on this machine"
    "$python" -m pip wheel --disable-pip-version-check -q -w "$wheels" "$fedanon_wheel"
fi

log "wheels in $wheels:"
for whl in "$wheels"/*; do printf "  %s\n" "$(basename "$whl")" >&2; done
