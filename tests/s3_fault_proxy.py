# SPDX-License-Identifier: MIT
"""A fault-injecting HTTP proxy between the fetch stage and the test S3 server (radosgw).

    python3 tests/s3_fault_proxy.py UPSTREAM_PORT PORT_FILE LOG_FILE [EVERY]

Listens on 127.0.0.1 (a free port, written to PORT_FILE), forwards each request unchanged to
UPSTREAM_PORT on 127.0.0.1, or on the host STK_PROXY_UPSTREAM_HOST names (SigV4 signs the Host
header the client used; radosgw checks the signature against the same header, so a transparent
hop keeps it valid), and spoils every EVERY-th request's answer (default 3), cycling through the
faults a real link and a busy server produce:
  reset      the connection closed before any answer
  slowdown   503 with S3's <Code>SlowDown</Code> body (the server's answer is dropped)
  truncate   the answer's headers and half its body, then the connection closed
  stall      the answer's headers (nothing when it has no body), then silence for STALL
             seconds (env STK_PROXY_STALL_S, 3)
  500        an internal error
Each spoiled request is appended to LOG_FILE as "FAULT METHOD PATH". Runs until killed.
Env: STK_PROXY_FAULTS (comma-separated subset, in that order), STK_PROXY_SKIP (the first N
requests pass unspoiled), STK_PROXY_PORT (listen on this port rather than a free one). EVERY 0
spoils nothing.

A slow link (this kernel has no sch_netem for `tc netem`), exactly this and no more:
  STK_PROXY_DELAY_MS   every request's answer starts this many ms after the request arrived
                       (one round trip per request on a kept-alive connection: the RTT's cost to
                       a request/response protocol; not per-packet delay, no TCP slow start);
                       without STK_PROXY_RATE_MBIT the request goes upstream this many ms after
                       it arrived (the rate then comes from a link shaped by the kernel between
                       the proxy and its upstream: bench/s3_netns.sh)
  STK_PROXY_RATE_MBIT  the answers of all connections together leave at this many Mbit/s (10^6
                       bit/s of HTTP bytes, headers included): a shared schedule in 64 KiB
                       chunks, each sent when the link would have finished it (no bursts)
  STK_PROXY_RATE_MB_S  request and answer bodies of all connections together at this many MB/s
                       (bench/s3_pack.sh: uploads; 0 = no limit); applied before RATE_MBIT's
                       schedule when both are set
A barrier, to prove that several objects are fetched at once (tests/test_s3_stream_inflight.c):
  STK_PROXY_HOLD       K: the answers to GETs of a range of more than 128 KiB (a shard's parts;
                       a streaming open reads 128 KiB heads and single pages) are held until such
                       GETs of K distinct objects have arrived, or STK_PROXY_HOLD_S seconds (10)
                       have passed; then the hold is over for good, and LOG_FILE gets
                       "hold released: N objects" or "hold timed out: N objects"
STK_PROXY_LOG_REQUESTS=1 appends "request METHOD PATH RANGE" to LOG_FILE for every request as it
arrives, in order (tests/test_s3_slot_order.c), and "connection" for every connection accepted
(tests/test_s3_stream_conns.c).
Loss is emulated only as whole-connection resets (the "reset" fault, STK_PROXY_FAULTS=reset with
EVERY), not as dropped packets. The upstream's answer is read whole before it is sent on.
"""

import os
import socket
import sys
import threading
import time

FAULTS = ["reset", "slowdown", "truncate", "stall", "500"]
UPSTREAM_HOST = os.environ.get("STK_PROXY_UPSTREAM_HOST", "127.0.0.1")
LOG_REQUESTS = os.environ.get("STK_PROXY_LOG_REQUESTS") == "1"
RATE = float(os.environ.get("STK_PROXY_RATE_MB_S", "0")) * 1e6
BODIES = {"lock": threading.Lock(), "free_at": 0.0}


def throttle(n):
    """N bytes through a link of RATE bytes/s that all connections share: wait for their turn."""
    if RATE <= 0 or n <= 0:
        return
    with BODIES["lock"]:
        now = time.monotonic()
        BODIES["free_at"] = max(now, BODIES["free_at"]) + n / RATE
        wait = BODIES["free_at"] - now
    time.sleep(wait)


def read_request(conn):
    """One HTTP request (head + Content-Length body) from CONN, or None at EOF."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n")[1:]:
        k, _, v = line.partition(b":")
        if k.strip().lower() == b"content-length":
            length = int(v.strip())
    parts, have = [body], len(body)
    throttle(have)
    while have < length:
        chunk = conn.recv(1 << 20)
        if not chunk:
            return None
        throttle(len(chunk))
        parts.append(chunk)
        have += len(chunk)
    return head, b"".join(parts)


def forward(up_port, head, body):
    """Send the request upstream with Connection: close (not a signed header) and read the
    whole answer: (head, body) of the response."""
    lines = [l for l in head.split(b"\r\n") if not l.lower().startswith(b"connection:")]
    req = b"\r\n".join(lines) + b"\r\nConnection: close\r\n\r\n" + body
    s = socket.create_connection((UPSTREAM_HOST, up_port))
    s.sendall(req)
    parts = []   # joined once: the answer is copied once, not once per piece received
    while True:
        chunk = s.recv(1 << 20)
        if not chunk:
            break
        parts.append(chunk)
    s.close()
    resp = b"".join(parts)
    end = resp.find(b"\r\n\r\n")
    if end < 0:
        return resp, memoryview(b"")
    return resp[:end], memoryview(resp)[end + 4:]   # the body not copied


def answer(rhead, rbody):
    """The response re-framed for a keep-alive client: Content-Length, no chunking, no close."""
    lines = rhead.split(b"\r\n")
    keep = [l for l in lines[1:] if l.split(b":")[0].strip().lower() not in
            (b"connection", b"content-length", b"transfer-encoding")]
    if b"transfer-encoding: chunked" in rhead.lower():
        rbody = dechunk(bytes(rbody))
    return b"\r\n".join([lines[0]] + keep + [b"Content-Length: %d" % len(rbody)]) + b"\r\n\r\n", rbody


def dechunk(b):
    out, i = b"", 0
    while True:
        j = b.index(b"\r\n", i)
        n = int(b[i:j].split(b";")[0], 16)
        if n == 0:
            return out
        out += b[j + 2:j + 2 + n]
        i = j + 2 + n + 2


class Link:
    """The emulated link: a per-request delay and one rate shared by every connection."""

    def __init__(self):
        self.delay = float(os.environ.get("STK_PROXY_DELAY_MS", "0")) / 1e3
        mbit = float(os.environ.get("STK_PROXY_RATE_MBIT", "0"))
        self.bps = mbit * 1e6 / 8 if mbit > 0 else 0.0
        self.lock = threading.Lock()
        self.free_at = 0.0   # when the link has sent everything scheduled so far

    def request(self, t_arrived):
        """Without a rate of its own (the link shaped outside, bench/s3_netns.sh) the delay is
        spent before the request goes upstream: it then adds to the answer's transfer over the
        shaped link rather than overlapping it."""
        if self.delay and not self.bps:
            wait = t_arrived + self.delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)

    def send(self, conn, head, body, t_arrived):
        """The answer's HEAD and then its BODY (a bytes-like object), on the link's schedule."""
        if self.delay and self.bps:
            wait = t_arrived + self.delay - time.monotonic()
            if wait > 0:
                time.sleep(wait)
        # 64 KiB chunks of head + body, the first copied with the head (no small segment alone)
        view = memoryview(body)
        n0 = max(0, 65536 - len(head))
        first = head + bytes(view[:n0])
        if not self.bps:
            conn.sendall(first)
            if len(view) > n0:
                conn.sendall(view[n0:])
            return
        pieces = [first] + [view[i:i + 65536] for i in range(n0, len(view), 65536)]
        for chunk in pieces:
            with self.lock:
                start = max(time.monotonic(), self.free_at)
                self.free_at = start + len(chunk) / self.bps
                done = self.free_at
            wait = done - time.monotonic()
            if wait > 0:
                time.sleep(wait)
            conn.sendall(chunk)


LINK = None


class Hold:
    """STK_PROXY_HOLD: one barrier over the first big ranged GETs of K distinct objects."""

    def __init__(self, log):
        self.k = int(os.environ.get("STK_PROXY_HOLD", "0"))
        self.timeout = float(os.environ.get("STK_PROXY_HOLD_S", "10"))
        self.log = log
        self.keys = set()
        self.lock = threading.Lock()
        self.done = threading.Event()
        if self.k <= 0:
            self.done.set()

    def wait(self, head):
        if self.done.is_set():
            return
        first = head.split(b"\r\n")[0].split()
        if first[0] != b"GET":
            return
        rng = [l for l in head.split(b"\r\n") if l.lower().startswith(b"range:")]
        if not rng:
            return
        lo, _, hi = rng[0].split(b"=")[-1].partition(b"-")
        if int(hi) - int(lo) + 1 <= 131072:
            return
        with self.lock:
            self.keys.add(first[1].split(b"?")[0])
            if len(self.keys) >= self.k and not self.done.is_set():
                self.release("released")
        if not self.done.wait(self.timeout):
            with self.lock:
                if not self.done.is_set():
                    self.release("timed out")

    def release(self, how):
        with open(self.log, "a") as f:
            f.write("hold %s: %d objects\n" % (how, len(self.keys)))
        self.done.set()


HOLD = None


def serve(conn, up_port, state, log):
    if LOG_REQUESTS:
        with open(log, "a") as f:
            f.write("connection\n")
    try:
        while True:
            req = read_request(conn)
            if req is None:
                return
            head, body = req
            t_arrived = time.monotonic()
            with state["lock"]:
                state["n"] += 1
                fault = None
                if state["every"] and state["n"] > state["skip"] and state["n"] % state["every"] == 0:
                    fault = FAULTS[state["k"] % len(FAULTS)]
                    state["k"] += 1
            first = head.split(b"\r\n")[0].decode(errors="replace")
            if LOG_REQUESTS:
                rng = [l.split(b":", 1)[1].strip().decode() for l in head.split(b"\r\n")[1:]
                       if l.lower().startswith(b"range:")]
                with open(log, "a") as f:
                    f.write("request %s %s\n" % (" ".join(first.split()[:2]), rng[0] if rng else "-"))
            if fault:
                with open(log, "a") as f:
                    f.write("%s %s\n" % (fault, " ".join(first.split()[:2])))
            if fault == "reset":
                conn.close()
                return
            if fault in ("slowdown", "500"):
                code = (b"503 Slow Down", b"SlowDown") if fault == "slowdown" else \
                       (b"500 Internal Server Error", b"InternalError")
                xml = b"<?xml version=\"1.0\"?><Error><Code>" + code[1] + b"</Code></Error>"
                conn.sendall(b"HTTP/1.1 " + code[0] + b"\r\nContent-Type: application/xml\r\n"
                             b"Content-Length: %d\r\n\r\n" % len(xml) + xml)
                continue
            HOLD.wait(head)
            LINK.request(t_arrived)
            rhead, rbody = answer(*forward(up_port, head, body))
            if fault == "truncate":
                conn.sendall(rhead + rbody[:len(rbody) // 2])
                conn.close()
                return
            if fault == "stall":   # silence mid-body; an empty answer is withheld whole
                if rbody:
                    conn.sendall(rhead)
                time.sleep(float(os.environ.get("STK_PROXY_STALL_S", "3")))
                conn.close()
                return
            throttle(len(rbody))
            LINK.send(conn, rhead, rbody, t_arrived)
    except OSError:
        pass
    finally:
        conn.close()


def main():
    up_port, port_file, log = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    every = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    srv = socket.socket()
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind(("127.0.0.1", int(os.environ.get("STK_PROXY_PORT", "0"))))
    srv.listen(64)
    with open(port_file + ".tmp", "w") as f:
        f.write(str(srv.getsockname()[1]))
    os.rename(port_file + ".tmp", port_file)
    state = {"lock": threading.Lock(), "n": 0, "k": 0, "every": every,
             "skip": int(os.environ.get("STK_PROXY_SKIP", "0"))}
    global FAULTS, LINK, HOLD
    LINK = Link()
    HOLD = Hold(log)
    if os.environ.get("STK_PROXY_FAULTS"):
        FAULTS = os.environ["STK_PROXY_FAULTS"].split(",")
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=serve, args=(conn, up_port, state, log), daemon=True).start()


if __name__ == "__main__":
    main()
