# SPDX-License-Identifier: MIT
"""Helpers of the s3 stats tests: the server's environment (the `s3` CTest fixture), a bucket
filled with boto3 (a client independent of stoker's own) and the tests' proxy
(tests/s3_fault_proxy.py) as an emulated slow link in front of the server."""

import os
import shutil
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROXY = os.path.join(os.path.dirname(HERE), "s3_fault_proxy.py")

UPLOAD = """
import boto3, os, sys
s3 = boto3.client("s3", endpoint_url=os.environ["AWS_ENDPOINT_URL"],
                  region_name=os.environ["AWS_REGION"])
bucket, prefix, local, names = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
s3.create_bucket(Bucket=bucket)
for n in names:
    s3.upload_file(os.path.join(local, n), bucket, prefix + n)
"""


def read_server_env():
    """The fixture's AWS_* variables (skip without Ceph, fail without the fixture)."""
    path = os.environ.get("STK_S3_ENV")
    if not path or not os.path.exists(path):
        if shutil.which("radosgw") is None:
            pytest.skip("Ceph packages missing (apt-get install ceph-mon ceph-osd radosgw ceph-common)")
        pytest.fail("no S3 server environment (STK_S3_ENV=%r): the s3 fixture did not start" % path)
    env = {}
    for line in open(path):
        line = line.strip()
        if line.startswith("export "):
            k, _, v = line[7:].partition("=")
            env[k] = v
    return env


def server_env():
    """The fixture's AWS_* variables, set in os.environ too."""
    env = read_server_env()
    os.environ.update(env)
    os.environ.pop("AWS_PROFILE", None)
    return env


def shard_names(local):
    return sorted(n for n in os.listdir(local) if n.startswith("shard-") and n.endswith(".lmdb"))


def upload(local, bucket, prefix="sets/ds/"):
    """The shards of LOCAL into s3://BUCKET/PREFIX with boto3 (Debian's, under /usr/bin/python3);
    returns the URL."""
    names = shard_names(local)
    assert names
    up = subprocess.run(["/usr/bin/python3", "-c", UPLOAD, bucket, prefix, local] + names,
                        capture_output=True, text=True, timeout=300)
    if up.returncode != 0 and "No module named 'boto3'" in up.stderr:
        pytest.fail("python3-boto3 missing (scripts/deps.sh test installs it)")
    assert up.returncode == 0, up.stderr
    return "s3://%s/%s" % (bucket, prefix.rstrip("/"))


def packed_folder(stoker_mod, tmp_path_factory, tag, count, seed):
    """An ImageFolder of COUNT JPEGs of about 100 kB in 3 class folders (c0, c1, c2, in turn)
    packed in shards of 1 MiB (the smallest): the local shards' path."""
    from conftest import jpeg_bytes
    import numpy as np
    src = str(tmp_path_factory.mktemp(tag + "folder"))
    rng = np.random.default_rng(seed)
    for i in range(count):
        d = os.path.join(src, "c%d" % (i % 3))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "img%03d.jpg" % i), "wb") as f:
            f.write(jpeg_bytes(rng, 320 + i, 300, quality=95))
    local = os.path.join(str(tmp_path_factory.mktemp(tag + "shards")), "ds")
    stoker_mod.pack(src, local, shard_bytes=1 << 20, threads=2)
    return local


class SlowLink:
    """tests/s3_fault_proxy.py with no faults, a per-request delay and an aggregate rate, in front
    of the server: .endpoint is its URL."""

    def __init__(self, tmp, rate_mbit, delay_ms=10.0):
        up = int(os.environ["AWS_ENDPOINT_URL"].rsplit(":", 1)[1].strip("/"))
        port_file = os.path.join(str(tmp), "proxy.port")
        env = dict(os.environ, STK_PROXY_RATE_MBIT=str(rate_mbit), STK_PROXY_DELAY_MS=str(delay_ms))
        self.proc = subprocess.Popen([sys.executable, PROXY, str(up), port_file,
                                      os.path.join(str(tmp), "proxy.log"), "0"], env=env)
        t0 = time.monotonic()
        while not os.path.exists(port_file):
            assert self.proc.poll() is None, "the proxy exited"
            assert time.monotonic() - t0 < 60, "the proxy did not start"
            time.sleep(0.05)
        self.endpoint = "http://127.0.0.1:%s" % open(port_file).read().strip()

    def close(self):
        self.proc.kill()
        self.proc.wait()
