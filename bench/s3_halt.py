#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""How long close() takes on a stoker.Loader streaming an s3:// dataset while its shards are
still downloading (docs/S3.md "Streaming", step 7): a Loader with shuffle_window over an empty
cache behind tests/s3_fault_proxy.py as a slow link; iterating in a thread, closed from the main
thread SECONDS after the start. Prints close()'s seconds and any part file left in the cache.

    eval "$(scripts/s3-server.sh env DIR)"     # the test server, with a dataset uploaded
    STOKER_LIBRARY=build/libstoker.so python3 bench/s3_halt.py s3://BUCKET/PREFIX [--mbit 8]
        [--delay-ms 20] [--window 2] [--after 2]
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("url")
    ap.add_argument("--mbit", type=float, default=8.0)
    ap.add_argument("--delay-ms", type=float, default=20.0)
    ap.add_argument("--window", type=int, default=2)
    ap.add_argument("--after", type=float, default=2.0)
    args = ap.parse_args()
    import stoker
    tmp = tempfile.mkdtemp(prefix="stk-s3halt-")
    up = os.environ["AWS_ENDPOINT_URL"].rstrip("/").rsplit(":", 1)[1]
    pf = os.path.join(tmp, "port")
    env = dict(os.environ, STK_PROXY_RATE_MBIT=str(args.mbit), STK_PROXY_DELAY_MS=str(args.delay_ms))
    proxy = subprocess.Popen([sys.executable, os.path.join(ROOT, "tests", "s3_fault_proxy.py"), up, pf,
                              os.path.join(tmp, "log"), "0"], env=env)
    try:
        while not os.path.exists(pf):
            time.sleep(0.05)
        os.environ["AWS_ENDPOINT_URL"] = "http://127.0.0.1:" + open(pf).read().strip()
        ld = stoker.Loader(args.url, 64, size=64, workers=2, cache=os.path.join(tmp, "cache"),
                           shuffle_window=args.window)

        def run():
            try:
                for _ in ld:
                    pass
            except Exception as e:  # a closed loader may end its pass with an error
                print("the pass ended with", type(e).__name__)

        t = threading.Thread(target=run)
        t.start()
        time.sleep(args.after)
        t0 = time.monotonic()
        ld.close()
        t.join()
        print("close() %.1f s after the start, while downloading: %.2f s" % (args.after, time.monotonic() - t0))
        parts = [f for d, _, fs in os.walk(tmp) for f in fs if ".part." in f]
        print("part files left in the cache: %s" % (parts or "none"))
    finally:
        proxy.kill()
        proxy.wait()


if __name__ == "__main__":
    main()
