#!/usr/bin/env bash
# SPDX-License-Identifier: MIT
# A real S3 server for the tests and benchmarks: Ceph's RADOS Gateway (Debian's ceph-mon, ceph-osd,
# radosgw, ceph-common) on a one-node cluster — one monitor, one memstore OSD (RAM-backed: the
# data is gone at stop), no mgr — listening on 127.0.0.1 only. Everything lives in one state
# directory, with ports of its own, so that parallel runs on one host do not meet.
#
#   s3-server.sh start DIR   start (DIR is created; a server left there is stopped first), then
#                            print the environment to use, as `env` does
#   s3-server.sh env DIR     print AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
#                            AWS_REGION as shell assignments (eval "$(s3-server.sh env DIR)"),
#                            and the same server over HTTPS: STK_S3_HTTPS_ENDPOINT with its
#                            self-signed certificate STK_S3_CA_BUNDLE (for AWS_CA_BUNDLE)
#   s3-server.sh stop DIR    stop gateway, OSD, monitor (in that order) and remove DIR
#
# Env STK_S3_EXTRA_ADDR: an address of this host that the gateway listens on too, on the same
# port (bench/s3_netns.sh: the far end of a shaped link).
# Exit 77 when the Ceph packages are missing (scripts/deps.sh test installs them).
# Why these settings, and the measured times: docs/S3.md.
set -euo pipefail

cmd=${1:-}
dir=${2:-}
[ -n "$cmd" ] && [ -n "$dir" ] || { echo "usage: s3-server.sh start|stop|env DIR" >&2; exit 2; }

emit_env() {
  [ -f "$dir/env" ] || { echo "s3-server.sh: no server in $dir" >&2; exit 1; }
  cat "$dir/env"
}

stop() {
  [ -d "$dir" ] || return 0
  local name pids=() i
  # memstore holds nothing worth a clean shutdown: TERM all three, KILL what is left after 2 s
  for name in rgw osd mon; do
    [ -f "$dir/$name.pid" ] && pids+=("$(cat "$dir/$name.pid")")
  done
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
  for i in $(seq 20); do
    kill -0 "${pids[@]}" 2>/dev/null || break
    sleep 0.1
  done
  [ ${#pids[@]} -gt 0 ] && kill -9 "${pids[@]}" 2>/dev/null || true
  rm -f "$dir"/*.pid
  if [ -n "${keep_logs:-}" ]; then rm -f "$dir/env"; else rm -rf "$dir"; fi
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

start() {
  for b in ceph-mon ceph-osd radosgw radosgw-admin ceph ceph-authtool monmaptool; do
    command -v "$b" >/dev/null || { echo "s3-server.sh: $b missing (apt-get install ceph-mon ceph-osd radosgw ceph-common)" >&2; exit 77; }
  done
  # a server left in DIR (a test run that was killed) is stopped first: DIR is this script's own
  if [ -f "$dir/rgw.pid" ] || [ -f "$dir/mon.pid" ]; then
    echo "s3-server.sh: stopping the server left in $dir" >&2
    stop
  fi
  rm -rf "$dir"
  mkdir -p "$dir"/{mon,osd,run,log}
  dir=$(cd "$dir" && pwd)
  # a failed start leaves no daemon behind (the logs stay for a look: $dir/log)
  trap 'rc=$?; if [ $rc -ne 0 ]; then keep_logs=1 stop; fi' EXIT
  local t0 fsid mon_port rgw_port tls_port conf key secret i
  t0=$(date +%s.%N)
  fsid=$(python3 -c 'import uuid; print(uuid.uuid4())')
  mon_port=$(free_port)
  rgw_port=$(free_port)
  tls_port=$(free_port)
  # HTTPS beside HTTP: a self-signed certificate for 127.0.0.1 and localhost
  openssl req -x509 -newkey rsa:2048 -nodes -days 7 -subj /CN=localhost \
    -addext "subjectAltName=IP:127.0.0.1,DNS:localhost" \
    -keyout "$dir/tls.key" -out "$dir/tls.crt" >/dev/null 2>&1 ||
    { echo "s3-server.sh: openssl could not make a certificate" >&2; exit 1; }
  conf=$dir/ceph.conf
  cat >"$conf" <<EOF
[global]
fsid = $fsid
mon_host = v1:127.0.0.1:$mon_port
auth_cluster_required = cephx
auth_service_required = cephx
auth_client_required = cephx
keyring = $dir/\$name.keyring
run_dir = $dir/run
admin_socket = $dir/run/\$name.asok
log_file = $dir/log/\$name.log
pid_file = $dir/run/\$name.pid
ms_bind_msgr2 = false
osd_pool_default_size = 1
osd_pool_default_min_size = 1
osd_pool_default_pg_num = 8
osd_pool_default_pgp_num = 8
osd_pool_default_pg_autoscale_mode = off
osd_crush_chooseleaf_type = 0
mon_allow_pool_size_one = true
mon_warn_on_pool_no_redundancy = false
mon_max_pg_per_osd = 1000
mon_data_avail_crit = 1
mon_data_avail_warn = 2
[mon.a]
mon_data = $dir/mon
public_addr = 127.0.0.1:$mon_port
[osd.0]
osd_data = $dir/osd
osd_objectstore = memstore
keyring = $dir/osd/keyring
memstore_device_bytes = 4294967296
[client.rgw.stk]
rgw_frontends = beast endpoint=127.0.0.1:$rgw_port${STK_S3_EXTRA_ADDR:+ endpoint=$STK_S3_EXTRA_ADDR:$rgw_port} ssl_endpoint=127.0.0.1:$tls_port ssl_certificate=$dir/tls.crt ssl_private_key=$dir/tls.key
rgw_data = $dir/rgw
rgw_dns_name = localhost
rgw_init_timeout = 60
EOF
  export CEPH_CONF=$conf
  # keys: the monitor's, the admin's, the gateway's
  ceph-authtool --create-keyring "$dir/mon.a.keyring" --gen-key -n mon. --cap mon 'allow *' >/dev/null
  ceph-authtool --create-keyring "$dir/client.admin.keyring" --gen-key -n client.admin \
    --cap mon 'allow *' --cap osd 'allow *' --cap mds 'allow *' --cap mgr 'allow *' >/dev/null
  ceph-authtool --create-keyring "$dir/client.rgw.stk.keyring" --gen-key -n client.rgw.stk \
    --cap mon 'allow rw' --cap osd 'allow rwx' >/dev/null
  ceph-authtool "$dir/mon.a.keyring" --import-keyring "$dir/client.admin.keyring" >/dev/null
  ceph-authtool "$dir/mon.a.keyring" --import-keyring "$dir/client.rgw.stk.keyring" >/dev/null
  monmaptool --create --fsid "$fsid" --addv a "[v1:127.0.0.1:$mon_port]" "$dir/monmap" >/dev/null
  ceph-mon -i a --mkfs --monmap "$dir/monmap" --keyring "$dir/mon.a.keyring" >"$dir/log/mon-mkfs.out" 2>&1
  ceph-mon -i a -f >"$dir/log/mon.out" 2>&1 &
  echo $! >"$dir/mon.pid"
  # the OSD
  local uuid
  uuid=$(python3 -c 'import uuid; print(uuid.uuid4())')
  ceph --connect-timeout 20 osd new "$uuid" >/dev/null
  ceph-osd -i 0 --mkfs --no-mon-config --osd-uuid "$uuid" --mkkey >"$dir/log/osd-mkfs.out" 2>&1 ||
    { echo "s3-server.sh: ceph-osd --mkfs failed:" >&2; tail -5 "$dir/log/osd-mkfs.out" >&2; exit 1; }
  ceph auth add osd.0 osd 'allow *' mon 'allow profile osd' -i "$dir/osd/keyring" >/dev/null 2>&1
  ceph-osd -i 0 -f >"$dir/log/osd.out" 2>&1 &
  echo $! >"$dir/osd.pid"
  # the gateway creates its pools at its first start
  radosgw -n client.rgw.stk -f >"$dir/log/rgw.out" 2>&1 &
  echo $! >"$dir/rgw.pid"
  key=STK$(python3 -c 'import secrets; print(secrets.token_hex(8).upper())')
  secret=$(python3 -c 'import secrets; print(secrets.token_hex(20))')
  for i in $(seq 600); do
    if python3 - "$rgw_port" <<'EOF' 2>/dev/null; then break; fi
import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
s.sendall(b"GET / HTTP/1.0\r\n\r\n"); sys.exit(0 if s.recv(12).startswith(b"HTTP/1.") else 1)
EOF
    kill -0 "$(cat "$dir/rgw.pid")" 2>/dev/null || { echo "s3-server.sh: radosgw exited; $dir/log/client.rgw.stk.log:" >&2; tail -20 "$dir/log/client.rgw.stk.log" >&2; exit 1; }
    [ "$i" -lt 600 ] || { echo "s3-server.sh: radosgw did not answer in 60 s; see $dir/log" >&2; exit 1; }
    sleep 0.1
  done
  radosgw-admin -n client.admin user create --uid=stoker --display-name=stoker \
    --access-key="$key" --secret="$secret" >/dev/null
  cat >"$dir/env" <<EOF
export AWS_ENDPOINT_URL=http://127.0.0.1:$rgw_port
export AWS_ACCESS_KEY_ID=$key
export AWS_SECRET_ACCESS_KEY=$secret
export AWS_REGION=us-east-1
export STK_S3_HTTPS_ENDPOINT=https://127.0.0.1:$tls_port
export STK_S3_CA_BUNDLE=$dir/tls.crt
EOF
  echo "s3-server.sh: radosgw on 127.0.0.1:$rgw_port ready in $(python3 -c "import time; print(round(time.time()-$t0, 1))") s" >&2
  emit_env
}

case "$cmd" in
  start) start ;;
  stop) stop ;;
  env) emit_env ;;
  *) echo "usage: s3-server.sh start|stop|env DIR" >&2; exit 2 ;;
esac
