#!/usr/bin/env python3
"""Keep-alive HTTP/1.1 clients that behave like the API server's webhook client, for the
SIGTERM phase of scripts/soak.sh.

Each of --clients threads keeps one TLS connection and posts the review again and again
with a small random pause. Like Go's net/http transport, a connection the server closed
while idle is noticed before the next request (the socket turns readable) and replaced:
that is not a failure. A request that was written and then got no response (EOF or reset)
is what the API server reports as a failed webhook call (Go does not retry a POST), so it
is counted as failed in flight. Stops when connections are refused (the server exited)
or at --seconds. Prints one line: "keepalive ok=N failed_in_flight=N idle_closed=N
refused=N" and the first few failures on stderr.
"""
import argparse, http.client, random, select, socket, ssl, sys, threading, time

p = argparse.ArgumentParser()
p.add_argument("--port", type=int, required=True)
p.add_argument("--ca", required=True)
p.add_argument("--body", required=True)
p.add_argument("--clients", type=int, default=4)
p.add_argument("--seconds", type=float, default=15)
p.add_argument("--max-pause-ms", type=float, default=20)
args = p.parse_args()

body = open(args.body, "rb").read()
ctx = ssl.create_default_context(cafile=args.ca)
ctx.set_alpn_protocols(["http/1.1"])
lock = threading.Lock()
totals = {"ok": 0, "failed_in_flight": 0, "idle_closed": 0, "refused": 0, "bad_status": 0}
deadline = time.monotonic() + args.seconds


def count(key, detail=None):
    with lock:
        totals[key] += 1
        if detail and totals[key] <= 5:
            print(f"keepalive {key}: {detail}", file=sys.stderr)


def worker():
    conn = None
    while time.monotonic() < deadline:
        if conn is None:
            conn = http.client.HTTPSConnection("127.0.0.1", args.port, context=ctx, timeout=30)
            try:
                conn.connect()
            except (ConnectionRefusedError, ConnectionResetError, ssl.SSLError, OSError):
                count("refused")
                conn = None
                return  # the listener is gone: the server is shutting down or exited
        # Idle close noticed before reuse, as Go's transport does with its read loop.
        readable, _, _ = select.select([conn.sock], [], [], 0)
        if readable:
            count("idle_closed")
            conn.close()
            conn = None
            continue
        try:
            conn.request("POST", "/mutate?timeout=10s", body=body,
                         headers={"Content-Type": "application/json"})
        except OSError as e:
            count("idle_closed", f"write failed: {e!r}")
            conn.close()
            conn = None
            continue
        try:
            resp = conn.getresponse()
            data = resp.read()
            if resp.status == 200 and b'"allowed":true' in data:
                count("ok")
            else:
                count("bad_status", f"{resp.status} {data[:120]!r}")
            if resp.getheader("connection", "").lower() == "close":
                conn.close()
                conn = None
        except (http.client.HTTPException, OSError) as e:
            count("failed_in_flight", repr(e))
            conn.close()
            conn = None
        time.sleep(random.uniform(0, args.max_pause_ms) / 1000)


threads = [threading.Thread(target=worker) for _ in range(args.clients)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("keepalive " + " ".join(f"{k}={v}" for k, v in totals.items()))
