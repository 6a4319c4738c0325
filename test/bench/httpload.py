"""httpload.py — the lab's real HTTP path: nginx (Debian)
as the server and vegeta (github.com/tsenart/vegeta, built by
hack/build-vegeta.sh) as the open-loop client, in the lab's namespaces.

  start_nginx(lab, ns, name, addr)   nginx serving FILES on addr:HTTP_PORT in ns
  run_vegeta(lab, ns, url, ...)      a constant-rate attack (or on/off bursts:
                                     a base attack plus one short attack per
                                     period), results decoded into the same
                                     summary loadgen prints

vegeta paces requests at a constant rate and spawns workers as needed (open
loop); a request's latency runs from its send to the last byte of the
response body (-max-body 0: the body is read and discarded). Errors are
non-200 answers and transport errors; timeouts (-timeout) are counted apart,
and with them what an attack that stalled never recorded."""

import csv
import io
import json
import os
import signal
import subprocess
import time

import lab as L

# an attack still running this long after its last request's timeout has
# stalled (run_vegeta)
STALL_MARGIN_S = 10.0

# response sizes the lab asks for -> file names under nginx's root
FILES = {8192: "8k", 32768: "32k", 65536: "64k", 262144: "256k"}


def start_nginx(lab, ns, name, addr, port=None):
    """nginx with a private prefix in the lab's tmp dir, one worker (at the
    lab's priority: lab.rt_argv), keepalive without a request cap, no access log.
    tcp_nopush (TCP_CORK around sendfile) off: with bbr it held small
    responses one 4 ms timer tick (idle p99 4.7 ms against 0.3 ms without)."""
    port = port or L.HTTP_PORT
    prefix = os.path.join(lab.tmp, f"nginx-{name}")
    www = os.path.join(prefix, "www")
    os.makedirs(www, exist_ok=True)
    for size, fname in FILES.items():
        with open(os.path.join(www, fname), "wb") as f:
            f.write(os.urandom(size))
    conf = os.path.join(prefix, "nginx.conf")
    with open(conf, "w") as f:
        f.write(f"""worker_processes 1;
user root;
pid {prefix}/nginx.pid;
error_log {prefix}/error.log warn;
events {{ worker_connections 8192; }}
http {{
    access_log off;
    sendfile on;
    tcp_nopush off;
    tcp_nodelay on;
    keepalive_requests 10000000;
    keepalive_timeout 120s;
    default_type application/octet-stream;
    client_body_temp_path {prefix}/body;
    server {{
        listen {addr}:{port} backlog=4096;
        root {www};
    }}
}}
""")
    rt = L.rt_argv()
    p = lab.spawn(f"nginx-{name}", L.nsexec(ns, *rt, lab.nginx, "-p", prefix, "-c", conf, "-g", "daemon off;"))
    lab._wait_port(ns, addr, port, p)
    return p


def rate_spec(rps):
    """vegeta's -rate N/unit with an integer N: tenths of a request per second."""
    return f"{max(1, round(rps * 10))}/10s"


def vegeta_argv(lab, ns, target_file, rps, duration_s, out, timeout_s):
    rt = L.rt_argv()
    return L.nsexec(ns, *rt, lab.vegeta, "attack", "-targets", target_file, "-rate", rate_spec(rps), "-duration",
                    f"{duration_s:.3f}s", "-timeout", f"{timeout_s:g}s", "-max-body", "0", "-keepalive=true",
                    "-http2=false", "-workers", "16", "-output", out)


def percentile(sorted_vals, q):
    """Nearest-rank percentile of a sorted list (q in [0, 100])."""
    if not sorted_vals:
        return None
    k = max(0, min(len(sorted_vals) - 1, int(round(q / 100.0 * len(sorted_vals) + 0.5)) - 1))
    return sorted_vals[k]


def latency_summary(sorted_us):
    """count, p50, p90, p99, p99.9 (nearest rank), max and mean of a sorted
    list of latencies (us): the keys of loadgen's JSON summaries (also the
    SSE token client's, test/bench/sse_tokens.py)."""
    n = len(sorted_us)
    return {"count": n, "p50": percentile(sorted_us, 50), "p90": percentile(sorted_us, 90),
            "p99": percentile(sorted_us, 99), "p999": percentile(sorted_us, 99.9),
            "max": sorted_us[-1] if n else None, "mean": sum(sorted_us) / n if n else None}


def summarize(rows, warmup_s, t0_ns):
    """vegeta CSV rows -> the fields loadgen's JSON has (latency_us, errors,
    cdf), counting from t0 + warmup (by send timestamp)."""
    lat, errors, timeouts, other = [], 0, 0, {}
    cut = t0_ns + int(warmup_s * 1e9)
    total = 0
    for r in rows:
        ts, code, lat_ns, err = int(r[0]), int(r[1]), int(r[2]), r[5]
        if ts < cut:
            continue
        total += 1
        if err or code != 200:
            if "timeout" in err.lower() or "deadline exceeded" in err.lower():
                timeouts += 1
            else:
                errors += 1
                key = err.strip()[:120] or f"HTTP {code}"
                other[key] = other.get(key, 0) + 1
            continue
        lat.append(lat_ns / 1000.0)
    lat.sort()
    n = len(lat)
    cdf = []
    if n:
        steps = sorted({min(n - 1, int(n * f)) for f in [i / 200 for i in range(200)] + [0.995, 0.999, 0.9999]}
                       | {n - 1})
        cdf = [[lat[i], (i + 1) / n] for i in steps]
    return {
        "latency_us": latency_summary(lat),
        "sent": total, "errors": errors, "timeouts": timeouts, "error_kinds": other, "cdf": cdf,
    }


def run_vegeta(lab, ns, url, rps, duration_s, warmup_s, out_prefix, timeout_s=3.0, burst=None):
    """Run an attack (burst: (factor, on_ms, period_ms) -> a base attack at the
    off-rate plus, every period, an attack at (factor x rps - off-rate) for
    on_ms). Returns the summary dict (see summarize) plus rate and timing."""
    if lab.vegeta is None:
        raise L.LabError("vegeta is not built (run hack/build-vegeta.sh)")
    targets = f"{out_prefix}.targets"
    with open(targets, "w") as f:
        f.write(f"GET {url}\n")
    outs, procs = [], []
    if burst:
        factor, on_ms, period_ms = burst
        duty = on_ms / period_ms
        lo = rps * (1 - factor * duty) / (1 - duty)
        hi = rps * factor
    else:
        lo, hi = rps, None
    t_start = time.time()
    base = f"{out_prefix}.base.bin"
    outs.append(base)
    planned = 0  # requests the attacks are to send
    if lo > 0:
        procs.append(subprocess.Popen(vegeta_argv(lab, ns, targets, lo, duration_s, base, timeout_s),
                                      stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
        planned += round(lo * duration_s)
    bursts = 0
    if hi:
        k = 0
        while True:
            at = t_start + k * period_ms / 1000.0
            if at + on_ms / 1000.0 > t_start + duration_s:
                break
            time.sleep(max(0.0, at - time.time()))
            o = f"{out_prefix}.burst{k}.bin"
            outs.append(o)
            procs.append(subprocess.Popen(vegeta_argv(lab, ns, targets, hi - lo, on_ms / 1000.0, o, timeout_s),
                                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True))
            planned += round((hi - lo) * on_ms / 1000.0)
            bursts += 1
            k += 1
    errs, stalled = [], 0
    deadline = t_start + duration_s + timeout_s + STALL_MARGIN_S
    try:
        for p in procs:
            try:
                _, err = p.communicate(timeout=max(0.0, deadline - time.time()))
            except subprocess.TimeoutExpired:
                # a stalled attack (seen once: every attack of a cell stopped
                # recording at the same instant) costs this cell, not the run:
                # stopped (SIGINT flushes its results), and what it never
                # recorded counts below as timed out
                stalled += 1
                p.send_signal(signal.SIGINT)
                try:
                    p.communicate(timeout=5)
                except subprocess.TimeoutExpired:
                    p.kill()
                continue
            if p.returncode != 0:
                errs.append(f"exit {p.returncode}: {err.strip()[:300]}")
    finally:
        # never leave an attack behind
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=10)
    if errs:
        raise L.LabError(f"vegeta in {ns}: {'; '.join(errs)}")
    outs = [o for o in outs if os.path.exists(o)]
    enc = subprocess.run([lab.vegeta, "encode", "-to", "csv", *outs], capture_output=True, text=True, timeout=120)
    if enc.returncode != 0:
        raise L.LabError(f"vegeta encode: exit {enc.returncode}: {enc.stderr.strip()[:300]}")
    rows = [r for r in csv.reader(io.StringIO(enc.stdout)) if r]
    t0 = min((int(r[0]) for r in rows), default=int(t_start * 1e9))
    res = summarize(rows, warmup_s, t0)
    # requests a stalled attack never recorded: timed out (their send times
    # are unknown, so the warm-up cut does not apply to them)
    res["unrecorded"] = max(0, planned - len(rows)) if stalled else 0
    res["timeouts"] += res["unrecorded"]
    res["sent"] += res["unrecorded"]
    measured = max(1e-9, duration_s - warmup_s)
    res.update({"rate": rps, "achieved_rate": res["latency_us"]["count"] / measured, "bursts": bursts,
                "stalled_attacks": stalled, "t0_unix_ns": t0, "duration_s": duration_s, "warmup_s": warmup_s})
    with open(f"{out_prefix}.json", "w") as f:
        json.dump(res, f)
    for o in outs:
        os.unlink(o)
    return res
