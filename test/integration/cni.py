"""cni.py — helpers for the aiqos integration tests: network namespaces with
unique names, running CNI plugins the way libcni does (env + JSON stdin,
chaining with prevResult), and reading the kernel back independently of the
plugin (tc -j, ip -j, /proc/sys through `ip netns exec`).

Everything a test creates is registered on a Lab and removed by Lab.cleanup(),
which the `lab` fixture runs even when the test fails."""

import contextlib
import glob
import json
import os
import re
import secrets
import shutil
import socket
import subprocess
import tempfile
import threading
import time

REF_PLUGIN_DIR = os.environ.get("AIQOS_CNI_REF_DIR", "/usr/lib/cni")
NETNS_DIR = "/run/netns"
NS_PREFIX = "aqt-"
SESSION_TAG = secrets.token_hex(2)

# The per-netns sysctls the plugin may touch (and that a default pod must keep).
TUNED_SYSCTLS = (
    "net/ipv4/tcp_ecn",
    "net/ipv4/tcp_congestion_control",
    "net/ipv4/tcp_notsent_lowat",
    "net/ipv4/tcp_rmem",
    "net/ipv4/tcp_wmem",
)

ALL_VERSIONS = ("0.3.0", "0.3.1", "0.4.0", "1.0.0", "1.1.0")
BURST_CONTAINERD = 4294967295  # what containerd passes as burst (2^32 - 1 bits)


def version_tuple(v):
    return tuple(int(x) for x in v.split("."))


# ---------------------------------------------------------------------------
# Running commands


def sh(*argv, check=True, timeout=30, input=None):
    """Run argv, return CompletedProcess (text). Raises with full output on failure."""
    p = subprocess.run(
        [str(a) for a in argv], input=input, capture_output=True, text=True, timeout=timeout
    )
    if check and p.returncode != 0:
        raise RuntimeError(
            f"command failed (exit {p.returncode}): {' '.join(map(str, argv))}\n"
            f"stdout: {p.stdout}\nstderr: {p.stderr}"
        )
    return p


def in_ns(ns, *argv):
    """argv prefixed with `ip netns exec NS` when ns is a netns name (None = host)."""
    if ns is None:
        return list(argv)
    return ["ip", "netns", "exec", ns, *argv]


# ---------------------------------------------------------------------------
# Kernel readers (never the plugin's own output)


def read_sysctl(ns, key):
    """Value of /proc/sys/<key> inside netns ns, whitespace-normalised."""
    key = key.replace(".", "/")
    p = sh(*in_ns(ns, "cat", f"/proc/sys/{key}"))
    return " ".join(p.stdout.split())


def read_sysctls(ns, keys=TUNED_SYSCTLS):
    return {k: read_sysctl(ns, k) for k in keys}


def write_sysctl(ns, key, value):
    sh(*in_ns(ns, "sysctl", "-q", "-w", f"{key.replace('/', '.')}={value}"))


def links(ns=None):
    p = sh(*in_ns(ns, "ip", "-j", "-d", "link", "show"))
    return json.loads(p.stdout or "[]")


def link(ns, name):
    """ip -j -d link of one device, or None when it does not exist."""
    p = sh(*in_ns(ns, "ip", "-j", "-d", "link", "show", "dev", name), check=False)
    if p.returncode != 0:
        return None
    data = json.loads(p.stdout or "[]")
    return data[0] if data else None


def wait_link_gone(ns, name, timeout_s=5.0):
    """Netns teardown is asynchronous in the kernel (cleanup_net runs in a
    workqueue): a veth whose peer was in a deleted netns goes away shortly
    after `ip netns del` returns. True when gone within timeout_s."""
    deadline = time.monotonic() + timeout_s
    while link(ns, name) is not None:
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def link_names(ns=None):
    return {l["ifname"] for l in links(ns)}


def tc_qdiscs(ns, dev):
    p = sh(*in_ns(ns, "tc", "-j", "qdisc", "show", "dev", dev))
    return json.loads(p.stdout or "[]")


def root_qdisc(ns, dev):
    roots = [q for q in tc_qdiscs(ns, dev) if q.get("root")]
    return roots[0] if roots else None


def qdisc_by_handle(ns, dev, handle):
    for q in tc_qdiscs(ns, dev):
        if q.get("handle") == handle:
            return q
    return None


_RATE_UNITS = {
    "bit": 1,
    "kbit": 1000,
    "mbit": 1000**2,
    "gbit": 1000**3,
    "tbit": 1000**4,
    "bps": 8,
    "kbps": 8000,
    "mbps": 8 * 1000**2,
    "gbps": 8 * 1000**3,
}


def parse_rate_bps(text):
    """'10Mbit' -> 10000000 (tc prints SI units)."""
    m = re.fullmatch(r"([0-9.]+)([A-Za-z]*)", text)
    if not m:
        raise ValueError(f"cannot parse tc rate {text!r}")
    unit = m.group(2).lower() or "bit"
    if unit not in _RATE_UNITS:
        raise ValueError(f"unknown tc rate unit in {text!r}")
    return round(float(m.group(1)) * _RATE_UNITS[unit])


def tc_classes(ns, dev):
    """Classes of dev as dicts {kind, handle, parent, leaf, prio, rate_bps, ceil_bps}.
    iproute2 6.1 prints htb classes as text even with -j, so parse the text."""
    p = sh(*in_ns(ns, "tc", "class", "show", "dev", dev))
    out = []
    for line in p.stdout.splitlines():
        tok = line.split()
        if len(tok) < 3 or tok[0] != "class":
            continue
        c = {"kind": tok[1], "handle": tok[2], "parent": None, "leaf": None, "raw": line.strip()}
        i = 3
        while i < len(tok):
            t = tok[i]
            if t == "root":
                c["parent"] = "root"
                i += 1
            elif t in ("parent", "leaf", "prio", "rate", "ceil", "burst", "cburst", "quantum") and i + 1 < len(tok):
                c[t] = tok[i + 1]
                i += 2
            else:
                i += 1
        for k in ("rate", "ceil"):
            if k in c:
                c[k + "_bps"] = parse_rate_bps(c[k])
        out.append(c)
    return out


def tc_filters(ns, dev, where):
    """Filters of dev at `where` ("egress", "ingress" (clsact hooks) or "parent X:")."""
    args = ["tc", "-j", "filter", "show", "dev", dev] + where.split()
    p = sh(*in_ns(ns, *args), check=False)
    if p.returncode != 0 or not p.stdout.strip():
        return []
    return json.loads(p.stdout)


def tc_summary(ns, dev):
    """Readable dump for assertion messages."""
    parts = []
    for what, where in ((["qdisc"], []), (["class"], []), (["filter"], ["egress"]), (["filter"], ["ingress"])):
        argv = ["tc", *what, "show", "dev", dev, *where]
        p = sh(*in_ns(ns, *argv), check=False)
        parts.append(f"$ {' '.join(argv)}{' (netns ' + ns + ')' if ns else ''}\n{p.stdout}{p.stderr}")
    return "".join(parts)


# ---------------------------------------------------------------------------
# Network namespaces


class Netns:
    def __init__(self, name):
        self.name = name
        self.path = f"{NETNS_DIR}/{name}"

    @classmethod
    def create(cls, tag="t"):
        name = f"{NS_PREFIX}{SESSION_TAG}-{tag}-{secrets.token_hex(3)}"
        sh("ip", "netns", "add", name)
        ns = cls(name)
        # loopback up, like a runtime would do (the loopback plugin)
        sh("ip", "-n", name, "link", "set", "lo", "up")
        return ns

    def exists(self):
        return os.path.exists(self.path)

    def delete(self):
        if self.exists():
            sh("ip", "netns", "del", self.name, check=False)

    def __repr__(self):
        return f"Netns({self.name})"


# ---------------------------------------------------------------------------
# Subnet allocation: 10.199.N.0/24, unique within the process and not in use
# on the host (another run may be going on).

_subnet_lock = threading.Lock()
_subnets_used = set()
_subnet_next = [secrets.randbelow(200) + 1]


def _subnet_in_use_on_host(n):
    prefix = f"10.199.{n}."
    p = sh("ip", "-j", "-4", "addr", "show", check=False)
    for l in json.loads(p.stdout or "[]"):
        for a in l.get("addr_info", []):
            if a.get("local", "").startswith(prefix):
                return True
    p = sh("ip", "-j", "-4", "route", "show", "table", "all", check=False)
    for r in json.loads(p.stdout or "[]"):
        if str(r.get("dst", "")).startswith(prefix):
            return True
    return False


def alloc_subnet():
    with _subnet_lock:
        for _ in range(254):
            n = _subnet_next[0]
            _subnet_next[0] = n % 254 + 1
            if n in _subnets_used or _subnet_in_use_on_host(n):
                continue
            _subnets_used.add(n)
            return n
    raise RuntimeError("no free 10.199.N.0/24 subnet")


def free_subnet(n):
    with _subnet_lock:
        _subnets_used.discard(n)


# ---------------------------------------------------------------------------
# Running a plugin


class PluginRun:
    """Outcome of one plugin exec."""

    def __init__(self, argv0, command, env, stdin, proc, elapsed_s, log_file=None):
        self.argv0 = argv0
        self.command = command
        self.env = env
        self.stdin = stdin
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.elapsed_s = elapsed_s
        self.log_file = log_file
        self.json = None
        self.json_error = None
        if self.stdout.strip():
            try:
                self.json = json.loads(self.stdout)
            except ValueError as e:
                self.json_error = str(e)

    @property
    def error(self):
        """The CNI error object when stdout is one ({code, msg, details})."""
        if isinstance(self.json, dict) and "code" in self.json:
            return self.json
        return None

    def error_text(self):
        e = self.error or {}
        return f"{e.get('msg', '')} {e.get('details', '')}"

    def describe(self):
        envs = " ".join(f"{k}={v}" for k, v in sorted(self.env.items()) if k.startswith("CNI_"))
        log = ""
        if self.log_file and os.path.exists(self.log_file):
            with open(self.log_file, errors="replace") as f:
                tail = f.read()[-3000:]
            log = f"\n--- log file {self.log_file} (tail) ---\n{tail}"
        stdin = self.stdin if isinstance(self.stdin, str) else repr(self.stdin)
        if len(stdin) > 6000:
            stdin = stdin[:6000] + f"... ({len(stdin)} characters)"
        return (
            f"\n--- reproduce: {envs} {self.argv0} <<'EOF'\n{stdin}\nEOF\n"
            f"--- exit {self.rc}, {self.elapsed_s * 1000:.1f} ms\n--- stdout ---\n{self.stdout}"
            f"\n--- stderr ---\n{self.stderr}{log}"
        )

    def assert_ok(self, output=True):
        assert self.rc == 0, f"{self.command} failed{self.describe()}"
        if output:
            assert self.json is not None and self.error is None, f"{self.command}: no result JSON on stdout{self.describe()}"
        return self

    def assert_error(self, code=None):
        assert self.rc != 0, f"{self.command} succeeded but an error was expected{self.describe()}"
        assert self.error is not None, f"{self.command}: stdout is not a CNI error object{self.describe()}"
        e = self.error
        assert isinstance(e.get("code"), int), f"error code is not an int{self.describe()}"
        assert e.get("msg"), f"error without msg{self.describe()}"
        if code is not None:
            codes = code if isinstance(code, (tuple, list, set)) else (code,)
            assert e["code"] in codes, f"{self.command}: want error code {code}, got {e['code']}{self.describe()}"
        return e


def encode_ifname(name):
    """The state store's file-name encoding of an interface name (shared/ifname.c):
    bytes outside [A-Za-z0-9_.-] as %XX."""
    keep = set(b"abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-")
    return "".join(chr(b) if b in keep else "%%%02X" % b for b in name.encode())


def run_plugin(binary, command, stdin, containerid=None, netns=None, ifname=None, args=None,
               path=None, env_extra=None, unset=(), timeout=30, log_file=None):
    """Exec one CNI plugin like a runtime: CNI_* env + JSON on stdin.
    stdin may be a dict (serialised), str or bytes. Values of None are not set;
    names in `unset` are removed from the inherited environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
    env["CNI_COMMAND"] = command
    for k, v in (
        ("CNI_CONTAINERID", containerid),
        ("CNI_NETNS", netns),
        ("CNI_IFNAME", ifname),
        ("CNI_ARGS", args),
        ("CNI_PATH", path if path is not None else f"{os.path.dirname(binary)}:{REF_PLUGIN_DIR}"),
    ):
        if v is not None:
            env[k] = v
    for k in unset:
        env.pop(k, None)
    if env_extra:
        env.update(env_extra)
    if isinstance(stdin, (dict, list)):
        data = json.dumps(stdin)
    else:
        data = stdin
    raw = data.encode() if isinstance(data, str) else data
    t0 = time.perf_counter()
    proc = subprocess.run([binary], input=raw, capture_output=True, env=env, timeout=timeout)
    elapsed = time.perf_counter() - t0
    proc.stdout = proc.stdout.decode(errors="replace")
    proc.stderr = proc.stderr.decode(errors="replace")
    return PluginRun(binary, command, env, data if isinstance(data, str) else data, proc, elapsed, log_file)


def convert_result(result, to_version):
    """Convert a CNI result between versions the way libcni does for the
    versions used here (0.3.x/0.4.0 carry ips[].version, 1.x do not)."""
    r = json.loads(json.dumps(result))
    r["cniVersion"] = to_version
    old = version_tuple(result.get("cniVersion", "0.4.0")) < (1, 0, 0)
    new = version_tuple(to_version) < (1, 0, 0)
    if old and not new:
        for ip in r.get("ips", []):
            ip.pop("version", None)
    elif new and not old:
        for ip in r.get("ips", []):
            ip["version"] = "6" if ":" in ip.get("address", "") else "4"
    return r


def build_plugin_config(plugin_conf, net_name, version, prev_result=None, runtime_config=None):
    """libcni's buildOneConfig: inject name, cniVersion, runtimeConfig (only the
    capabilities the plugin declares) and prevResult."""
    c = json.loads(json.dumps(plugin_conf))
    c["name"] = net_name
    c["cniVersion"] = version
    if runtime_config:
        caps = c.get("capabilities", {})
        rc = {k: v for k, v in runtime_config.items() if caps.get(k)}
        if rc:
            c["runtimeConfig"] = rc
    if prev_result is not None:
        c["prevResult"] = convert_result(prev_result, version) if prev_result.get("cniVersion") != version else prev_result
    return c


# ---------------------------------------------------------------------------
# A fake agent on a unix socket (the plugin <-> agent protocol of proto.h)


class FakeAgent:
    """mode "hang": accept and never answer; "answer": reply per op."""

    def __init__(self, path, mode="answer", annotations=None, found=True):
        self.path = path
        self.mode = mode
        self.annotations = annotations or {}
        self.found = found
        self.requests = []
        self.connections = 0
        self._stop = threading.Event()
        self._conns = []
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(64)
        self.sock.settimeout(0.1)
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self._conns.append(conn)
            self.connections += 1
            if self.mode == "hang":
                continue
            try:
                conn.settimeout(2)
                buf = b""
                while b"\n" not in buf and len(buf) < 65536:
                    chunk = conn.recv(4096)
                    if not chunk:
                        break
                    buf += chunk
                line = buf.split(b"\n", 1)[0]
                try:
                    req = json.loads(line)
                except ValueError:
                    req = {"_raw": line.decode(errors="replace")}
                self.requests.append(req)
                if req.get("op") == "pod":
                    resp = {"ok": True, "found": self.found, "annotations": self.annotations}
                else:
                    resp = {"ok": True}
                conn.sendall(json.dumps(resp).encode() + b"\n")
            except OSError:
                pass
            finally:
                with contextlib.suppress(OSError):
                    conn.close()

    def close(self):
        self._stop.set()
        with contextlib.suppress(OSError):
            self.sock.close()
        for c in self._conns:
            with contextlib.suppress(OSError):
                c.close()
        self.thread.join(timeout=2)
        with contextlib.suppress(OSError):
            os.unlink(self.path)


# ---------------------------------------------------------------------------
# The lab: one per test, owns everything the test creates


class Attachment:
    """One pod attachment made by a chain (a conflist) in one netns."""

    def __init__(self, lab, netns, conflist, container_id, ifname, runtime_config, cni_args):
        self.lab = lab
        self.netns = netns
        self.conflist = conflist
        self.container_id = container_id
        self.ifname = ifname
        self.runtime_config = runtime_config or {}
        self.cni_args = cni_args
        self.results = []  # per plugin ADD result, in order
        self.result = None  # the cached result of the whole chain
        self.aiqos_add_run = None
        self.added = False

    # -- plumbing
    @property
    def version(self):
        return self.conflist["cniVersion"]

    def binary(self, plugin_type):
        if plugin_type == "aiqos":
            return self.lab.plugin
        return os.path.join(REF_PLUGIN_DIR, plugin_type)

    def aiqos_index(self):
        for i, p in enumerate(self.conflist["plugins"]):
            if p["type"] == "aiqos":
                return i
        raise KeyError("no aiqos plugin in the conflist")

    def plugin_version(self, index):
        """cniVersion spoken to plugin `index`: the conflist's, except where a
        plugin entry carries "_version" (the reference plugins 1.1.1 stop at
        1.0.0, so a 1.1.0 chain talks 1.0.0 to them; libcni >= 1.2 does the
        same conversion of results between plugins)."""
        return self.conflist["plugins"][index].get("_version") or self.version

    def config_for(self, index, prev_result, version=None):
        p = dict(self.conflist["plugins"][index])
        p.pop("_version", None)
        return build_plugin_config(p, self.conflist["name"], version or self.plugin_version(index), prev_result,
                                   self.runtime_config)

    def exec(self, index, command, conf, **kw):
        p = self.conflist["plugins"][index]
        kw.setdefault("containerid", self.container_id)
        kw.setdefault("netns", self.netns.path if self.netns else "")
        kw.setdefault("ifname", self.ifname)
        kw.setdefault("args", self.cni_args)
        kw.setdefault("log_file", self.lab.log_file if p["type"] == "aiqos" else None)
        return run_plugin(self.binary(p["type"]), command, conf, **kw)

    # -- verbs, like libcni
    def add(self, check=True, aiqos_env=None):
        """Run the chain's ADD (aiqos_env: extra environment for aiqos's run,
        e.g. test failpoints). Returns the aiqos PluginRun (or the failing one)."""
        if self not in self.lab.attachments:
            self.lab.attachments.append(self)
        self.results = []
        prev = None
        last = None
        for i, p in enumerate(self.conflist["plugins"]):
            conf = self.config_for(i, prev)
            kw = {"env_extra": aiqos_env} if aiqos_env and p["type"] == "aiqos" else {}
            run = self.exec(i, "ADD", conf, **kw)
            last = run
            if p["type"] == "aiqos":
                self.aiqos_add_run = run
            if run.rc != 0:
                if check:
                    run.assert_ok()
                return run
            if run.json is None:
                if check:
                    run.assert_ok()
                return run
            self.results.append(run.json)
            prev = run.json
            self._remember_host_links(run.json)
        self.result = prev
        self.added = True
        return last

    def _remember_host_links(self, result):
        for itf in result.get("interfaces", []):
            if not itf.get("sandbox") and itf.get("name"):
                self.lab.host_links.add(itf["name"])

    def base_result(self):
        """Result of the plugin before aiqos (aiqos's prevResult at ADD); the
        last result for a chain without aiqos."""
        try:
            return self.results[self.aiqos_index() - 1]
        except KeyError:
            return self.results[-1]

    def aiqos(self, command, conf_update=None, prev="cached", version=None, drop=(), **kw):
        """Run only aiqos with `command`. prev: "cached" (the chain's result, as
        libcni does for CHECK/DEL), "base" (the previous plugin's result),
        None (no prevResult) or a dict."""
        idx = self.aiqos_index()
        if prev == "cached":
            prev_result = self.result if self.result is not None else (self.results[-1] if self.results else None)
        elif prev == "base":
            prev_result = self.base_result()
        else:
            prev_result = prev
        conf = self.config_for(idx, prev_result, version=version)
        if conf_update:
            conf.update(conf_update)
        for k in drop:
            conf.pop(k, None)
        return self.exec(idx, command, conf, **kw)

    def check(self, **kw):
        return self.aiqos("CHECK", **kw)

    def delete(self, only_aiqos=False, **kw):
        """DEL in reverse order (libcni). Returns the list of PluginRuns."""
        runs = []
        prev = self.result if version_tuple(self.version) >= (0, 4, 0) else None
        for i in reversed(range(len(self.conflist["plugins"]))):
            p = self.conflist["plugins"][i]
            if only_aiqos and p["type"] != "aiqos":
                continue
            conf = self.config_for(i, prev)
            runs.append(self.exec(i, "DEL", conf, **kw))
        if not only_aiqos:
            self.added = False
        return runs

    # -- facts
    def host_veth(self):
        """The host-side veth of the pod: a result interface without sandbox
        that is a veth in the host netns (with bridge, the bridge is skipped)."""
        res = self.base_result() if self.results else None
        for itf in (res or {}).get("interfaces", []):
            if itf.get("sandbox"):
                continue
            l = link(None, itf["name"])
            if l and l.get("linkinfo", {}).get("info_kind") == "veth":
                return itf["name"]
        return None

    def pod_ip(self):
        res = self.base_result()
        return res["ips"][0]["address"].split("/")[0]

    def state_path(self):
        return os.path.join(self.lab.state_dir, f"{self.container_id}@{encode_ifname(self.ifname)}.json")

    def state(self):
        """This attachment's state JSON, or None. Accepts any *.json in stateDir
        whose containerId/ifname match, the '@' name being the expected one."""
        p = self.state_path()
        if os.path.exists(p):
            with open(p) as f:
                return json.load(f)
        for f in glob.glob(os.path.join(self.lab.state_dir, "*.json")):
            try:
                with open(f) as fh:
                    s = json.load(fh)
            except (OSError, ValueError):
                continue
            if s.get("containerId") == self.container_id and s.get("ifname") == self.ifname:
                return s
        return None

    def assert_tuned(self):
        """Precondition for tests that go on from a successful ADD: a state
        without failure, and the kernel shows what the request asked for
        (read back independently of the plugin)."""
        s = self.state()
        assert s is not None, f"no state after ADD of {self.container_id}: {self.lab.state_dir_entries()}"
        assert not s.get("failure"), f"ADD recorded a failure: {s.get('failure')}\n{self.lab.log_tail()}"
        ann = self.runtime_config.get("io.kubernetes.cri.pod-annotations") or {}
        bw = self.runtime_config.get("bandwidth") or {}
        ns = self.netns.name
        if ann.get("ai.workload") in ("inference", "training"):
            assert s.get("class") == ann["ai.workload"], s.get("class")
            assert read_sysctl(ns, "net.ipv4.tcp_ecn") == "1", "tcp_ecn not tuned"
        if bw.get("egressRate"):
            r = root_qdisc(ns, self.ifname)
            assert r and r["kind"] == "htb", tc_summary(ns, self.ifname)
        if bw.get("ingressRate"):
            h = self.host_veth()
            r = root_qdisc(None, h)
            assert r and r["kind"] == "htb", tc_summary(None, h)
        return s

    def state_files(self):
        """Every file in stateDir that mentions this container id in its name."""
        if not os.path.isdir(self.lab.state_dir):
            return []
        return [f for f in os.listdir(self.lab.state_dir) if self.container_id in f]


def choice(state, item_id):
    for c in state.get("choices", []):
        if c.get("id") == item_id:
            return c
    return None


def choices_matching(state, pattern):
    return [c for c in state.get("choices", []) if re.search(pattern, c.get("id", ""))]


def degraded_entries(state):
    """The "degraded" list as (id, text) pairs, whatever the element shape."""
    out = []
    for d in state.get("degraded", []) or []:
        if isinstance(d, dict):
            ident = d.get("id") or d.get("item") or ""
            out.append((ident, json.dumps(d)))
        else:
            out.append((str(d), str(d)))
    return out


class Lab:
    """Owns the temp dir, netns, bridges, host links and attachments of a test."""

    def __init__(self, plugin, tag):
        self.plugin = plugin
        self.tag = tag
        self.tmp = tempfile.mkdtemp(prefix=f"aqt-{SESSION_TAG}-")
        os.chmod(self.tmp, 0o700)
        self.state_dir = os.path.join(self.tmp, "state")
        self.ipam_dir = os.path.join(self.tmp, "ipam")
        self.log_file = os.path.join(self.tmp, "aiqos.log")
        self.agent_socket = os.path.join(self.tmp, "agent.sock")  # nothing listens
        self.netnses = []
        self.bridges = []
        self.host_links = set()
        self.attachments = []
        self.agents = []
        self._subnets = []
        self._subnet = None
        self._lock = threading.Lock()

    # -- resources
    def netns(self):
        ns = Netns.create(self.tag)
        with self._lock:
            self.netnses.append(ns)
        return ns

    def subnet(self):
        """This test's /24 (one per Lab; pods share it like on a node)."""
        with self._lock:
            if self._subnet is None:
                n = alloc_subnet()
                self._subnets.append(n)
                self._subnet = f"10.199.{n}.0/24"
            return self._subnet

    def new_subnet(self):
        n = alloc_subnet()
        with self._lock:
            self._subnets.append(n)
        return f"10.199.{n}.0/24"

    def bridge_name(self):
        name = f"aqtbr{secrets.token_hex(4)}"  # 13 chars < IFNAMSIZ
        with self._lock:
            self.bridges.append(name)
        return name

    def fake_agent(self, **kw):
        a = FakeAgent(self.agent_socket, **kw)
        self.agents.append(a)
        return a

    # -- configs
    def ipam(self, subnet=None):
        return {
            "type": "host-local",
            "dataDir": self.ipam_dir,
            "ranges": [[{"subnet": subnet or self.subnet()}]],
            "routes": [{"dst": "0.0.0.0/0"}],
        }

    def ptp_conf(self, subnet=None):
        return {"type": "ptp", "ipMasq": False, "mtu": 1500, "ipam": self.ipam(subnet)}

    def bridge_conf(self, bridge=None, subnet=None):
        return {
            "type": "bridge",
            "bridge": bridge or self.bridge_name(),
            "isGateway": True,
            "ipMasq": False,
            "ipam": self.ipam(subnet),
        }

    def aiqos_conf(self, **extra):
        """The plugin's entry in a conflist (extra keys set to None are dropped)."""
        c = {
            "type": "aiqos",
            "capabilities": {"io.kubernetes.cri.pod-annotations": True, "bandwidth": True},
            "agentSocket": self.agent_socket,
            "stateDir": self.state_dir,
            "logFile": self.log_file,
            "logLevel": "debug",
        }
        c.update(extra)
        return {k: v for k, v in c.items() if v is not None}

    def conflist(self, version="1.0.0", base="ptp", aiqos_extra=None, base_conf=None, name=None):
        if base_conf is None:
            base_conf = self.ptp_conf() if base == "ptp" else self.bridge_conf()
        if version_tuple(version) > (1, 0, 0):
            base_conf = dict(base_conf, _version="1.0.0")
        return {
            "cniVersion": version,
            "name": name or f"aqt-{self.tag}",
            "plugins": [base_conf, self.aiqos_conf(**(aiqos_extra or {}))],
        }

    def attachment(self, version="1.0.0", base="ptp", annotations=None, bandwidth=None,
                   aiqos_extra=None, ifname="eth0", netns=None, conflist=None, container_id=None,
                   cni_args=None, base_conf=None):
        """Prepare (not run) an attachment in a new netns (or `netns`)."""
        if conflist is None:
            conflist = self.conflist(version, base, aiqos_extra, base_conf)
        rc = {}
        if annotations is not None:
            rc["io.kubernetes.cri.pod-annotations"] = annotations
        if bandwidth is not None:
            rc["bandwidth"] = bandwidth
        ns = netns if netns is not None else self.netns()
        cid = container_id or secrets.token_hex(32)
        if cni_args is None:
            cni_args = (
                f"IgnoreUnknown=1;K8S_POD_NAMESPACE=aqt;K8S_POD_NAME=pod-{cid[:8]};"
                f"K8S_POD_INFRA_CONTAINER_ID={cid};K8S_POD_UID=uid-{cid[:12]}"
            )
        return Attachment(self, ns, conflist, cid, ifname, rc, cni_args)

    def base_only(self, version="1.0.0", base="ptp", **kw):
        """An attachment whose chain is only the base plugin (aiqos run by hand)."""
        conf = self.ptp_conf() if base == "ptp" else self.bridge_conf()
        if version_tuple(version) > (1, 0, 0):
            conf["_version"] = "1.0.0"
        cl = {"cniVersion": version, "name": f"aqt-{self.tag}", "plugins": [conf]}
        return self.attachment(conflist=cl, **kw)

    def plain_pod(self, annotations=None, bandwidth=None):
        """A pod with a veth from ptp (its ADD done) and no aiqos yet; its
        sysctls as the kernel made them in .baseline_sysctls."""
        att = self.base_only(annotations=annotations, bandwidth=bandwidth)
        att.add()
        att.baseline_sysctls = read_sysctls(att.netns.name)
        return att

    def add_conf(self, att, **extra):
        """A valid aiqos ADD config for att (after its base plugin's result),
        then `extra` set at the top level."""
        conf = build_plugin_config(self.aiqos_conf(), f"aqt-{self.tag}", att.version, att.result, att.runtime_config)
        conf.update(extra)
        return conf

    def run_aiqos(self, att, command, conf, **kw):
        """Exec aiqos for attachment att with an explicit stdin."""
        kw.setdefault("containerid", att.container_id)
        kw.setdefault("netns", att.netns.path)
        kw.setdefault("ifname", att.ifname)
        kw.setdefault("args", att.cni_args)
        kw.setdefault("log_file", self.log_file)
        return run_plugin(self.plugin, command, conf, **kw)

    def add(self, **kw):
        """Prepare and run ADD of the whole chain; asserts success and that
        the attachment is tuned (Attachment.assert_tuned)."""
        a = self.attachment(**kw)
        a.add(check=True)
        a.assert_tuned()
        return a

    def state_dir_entries(self):
        if not os.path.isdir(self.state_dir):
            return []
        return sorted(os.listdir(self.state_dir))

    def state_jsons(self):
        return sorted(glob.glob(os.path.join(self.state_dir, "*.json")))

    def log_tail(self, n=4000):
        if not os.path.exists(self.log_file):
            return "(no log file)"
        with open(self.log_file, errors="replace") as f:
            return f.read()[-n:]

    # -- cleanup
    def cleanup(self):
        """Remove everything, best effort, never raising; returns problems seen."""
        problems = []
        for a in self.agents:
            with contextlib.suppress(Exception):
                a.close()
        for a in reversed(self.attachments):
            if a.results:
                try:
                    a.delete()
                except Exception as e:  # noqa: BLE001 - cleanup must go on
                    problems.append(f"DEL {a.container_id}: {e}")
        for ns in self.netnses:
            ns.delete()
        for name in sorted(self.host_links) + self.bridges:
            if link(None, name) is not None:
                sh("ip", "link", "del", name, check=False)
        for n in self._subnets:
            free_subnet(n)
        if not os.environ.get("AQT_KEEP"):
            shutil.rmtree(self.tmp, ignore_errors=True)
        return problems


def leftover_netns():
    """Our session's netns still present (for the session-level safety net)."""
    if not os.path.isdir(NETNS_DIR):
        return []
    return [n for n in os.listdir(NETNS_DIR) if n.startswith(f"{NS_PREFIX}{SESSION_TAG}-")]
