#!/usr/bin/env bash
# One joint run of three hospitals and a leader on this machine, with docker compose.
#
#   deploy/compose-demo.sh            build what is missing, run, copy the result out, tear down
#   KEEP=1 deploy/compose-demo.sh     leave the containers, network and volumes in place
#
# Steps: the local Debian base image (deploy/build-base.sh, skipped when it exists), the
# wheels (deploy/build-wheels.sh), the fedanon image, `compose up`, wait for the leader,
# copy /out (released.csv, report.json) to deploy/out/, `compose down`.
#
# Environment: BASE_IMAGE (default fedanon-base:bookworm; python:3.11-slim where a registry
# can be reached), FEDANON_IMAGE (default fedanon:local), COMPOSE_PROJECT_NAME (default
# fedanon-demo), OUT_DIR (default deploy/out), LEADER_TIMEOUT seconds (default 1800),
# FEDANON_REF (build fedanon from this commit instead of the working tree).
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
export BASE_IMAGE="${BASE_IMAGE:-fedanon-base:bookworm}"
export FEDANON_IMAGE="${FEDANON_IMAGE:-fedanon:local}"
project="${COMPOSE_PROJECT_NAME:-fedanon-demo}"
out_dir="${OUT_DIR:-$here/out}"
leader_timeout="${LEADER_TIMEOUT:-1800}"
keep="${KEEP:-0}"

log() { printf 'compose-demo: %s\n' "$*" >&2; }
die() { log "error: $*"; exit 1; }

start=$SECONDS
docker info >/dev/null 2>&1 || die "cannot talk to the Docker daemon (docker info failed)"
if docker compose version >/dev/null 2>&1; then
    compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
    compose_cmd=(docker-compose)
else
    die "neither 'docker compose' nor 'docker-compose' is installed"
fi
compose() { "${compose_cmd[@]}" -p "$project" -f "$here/docker-compose.yml" "$@"; }

if [[ "$BASE_IMAGE" == fedanon-base:* ]]; then
    log "base image $BASE_IMAGE"
    BASE_IMAGE="$BASE_IMAGE" "$here/build-base.sh"
fi
log "wheels"
"$here/build-wheels.sh"
log "image $FEDANON_IMAGE from $BASE_IMAGE"
# Every service shares one image: building it for one service builds it for all.
compose build ca

log "starting from scratch: removing what an earlier run of project $project left"
compose down --volumes --remove-orphans >/dev/null 2>&1 || true

teardown() {
    if [[ "$keep" == 1 ]]; then
        log "KEEP=1: leaving project $project up; remove it with:"
        log "  ${compose_cmd[*]} -p $project -f $here/docker-compose.yml down --volumes"
    else
        log "compose down"
        compose down --volumes --remove-orphans || true
    fi
}
trap teardown EXIT

log "compose up (certificates, data slices, three hospitals, leader)"
if ! compose up -d; then
    compose logs --no-color || true
    die "compose up failed (logs above)"
fi

leader="$(docker ps -aq --filter "label=com.docker.compose.project=$project" \
    --filter "label=com.docker.compose.service=leader" | head -n 1)"
[[ -n "$leader" ]] || die "no leader container was created"
log "waiting for the leader (at most ${leader_timeout}s)"
if ! rc="$(timeout "$leader_timeout" docker wait "$leader")"; then
    compose logs --no-color || true
    die "the leader did not finish within ${leader_timeout}s"
fi
compose logs --no-color leader
if [[ "$rc" != 0 ]]; then
    compose logs --no-color hospital-a hospital-b hospital-c || true
    die "the leader exited with status $rc"
fi

mkdir -p "$out_dir"
docker cp "$leader:/out/." "$out_dir/"
log "done in $((SECONDS - start))s; the result is in $out_dir:"
ls -l "$out_dir" >&2
