#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# bench/s3_stream.py over a link the kernel shapes, not the tests' Python proxy (docs/S3.md
# "A link shaped by the kernel"): the loaders run in a network namespace of their own, joined to
# this host by a veth pair whose host end sends at RATE Mbit/s (tc's tbf: one queue that every
# connection shares, TCP's own congestion control over it); the gateway listens on the host end's
# address too, and the bench's proxy (in the namespace) adds only the per-request delay, spent
# before each request goes upstream. This kernel has no sch_netem, so the delay stays the proxy's.
# Needs root (ip netns, ip link, tc).
#   bash bench/s3_netns.sh WORK [REPEATS [RATE_MBIT [DELAY_MS]]]   # 3, 1000, 20
# Env: BUILD (default build: its libstoker.so), VENV (default WORK/venv, as bench/s3_stream.sh
# makes it), IMAGES (default WORK/imnet), extra arguments for s3_stream.py in S3_STREAM_ARGS.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
work=${1:?usage: s3_netns.sh WORK [REPEATS [RATE_MBIT [DELAY_MS]]]}
reps=${2:-3} rate=${3:-1000} delay=${4:-20}
build=${BUILD:-$here/build} venv=${VENV:-$work/venv} images=${IMAGES:-$work/imnet}
lib=$(ls "$build"/libstoker.so 2>/dev/null || true)
[ -n "$lib" ] || { echo "no $build/libstoker.so: build first (scripts/build.sh)" >&2; exit 2; }
[ -x "$venv/bin/python" ] || { echo "no venv at $venv: run bench/s3_stream.sh once" >&2; exit 2; }
[ -d "$images" ] || { echo "no images at $images" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "s3_netns.sh needs root (ip netns, tc)" >&2; exit 2; }
mkdir -p "$work"
tag=$$ ns=stk-link-$$ host=10.77.$((RANDOM % 250)).1
peer=${host%.1}.2
v0=stkh$tag v1=stkn$tag
srv=$work/server-netns
cleanup() {
  bash "$here/scripts/s3-server.sh" stop "$srv" >/dev/null 2>&1 || true
  ip link del "$v0" 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT
ip netns add "$ns"
ip link add "$v0" type veth peer name "$v1"
ip link set "$v1" netns "$ns"
ip addr add "$host/30" dev "$v0"
ip link set "$v0" up
ip netns exec "$ns" ip addr add "$peer/30" dev "$v1"
ip netns exec "$ns" ip link set "$v1" up
ip netns exec "$ns" ip link set lo up
# the download direction (host to namespace): RATE, a queue of at most 50 ms at that rate
tc qdisc add dev "$v0" root tbf rate "${rate}mbit" burst 256kb latency "${TBF_LATENCY_MS:-50}ms"
STK_S3_EXTRA_ADDR=$host bash "$here/scripts/s3-server.sh" start "$srv" >/dev/null
eval "$(bash "$here/scripts/s3-server.sh" env "$srv")"
export AWS_ENDPOINT_URL=http://$host:${AWS_ENDPOINT_URL##*:}
echo "machine: $(nproc) cores; load average at the start: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "link: veth $v0 -> $ns, $(tc qdisc show dev "$v0" | head -1); $delay ms per request (proxy)"
ip netns exec "$ns" env STOKER_LIBRARY="$lib" "$venv/bin/python" "$here/bench/s3_stream.py" \
  "$images" "$work/bench" --repeat "$reps" --rate-mbit 0 --link-mbit "$rate" \
  --delay-ms "$delay" ${S3_STREAM_ARGS:-}
