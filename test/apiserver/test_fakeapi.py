"""Tests of the fake API server (fakeapi.py) itself.

Each test starts the server as a subprocess on ephemeral ports, drives it via
its control port, and talks to the TLS API port with http.client (plain
requests) or a raw TLS socket (watch streams, so chunk boundaries are visible).
Run: /usr/bin/python3 -m pytest -q test/apiserver
"""

import http.client
import json
import os
import select
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.parse
import warnings

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
FAKEAPI = os.path.join(HERE, "fakeapi.py")
GENCERTS = os.path.join(HERE, "gencerts.sh")
PYTHON = sys.executable or "/usr/bin/python3"
TOKEN = "tok-1"
NODE_SEL = "fieldSelector=" + urllib.parse.quote("spec.nodeName=n1")


def compact(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def wait_for(pred, timeout=3.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        v = pred()
        if v:
            return v
        time.sleep(0.02)
    raise AssertionError("timed out waiting for %s" % what)


class Truncated(Exception):
    """The connection ended inside a chunked body; .data holds the partial chunk."""

    def __init__(self, msg, data=b""):
        super().__init__(msg)
        self.data = data


class RawStream:
    """One HTTP/1.1 request over TLS, reading the chunked body chunk by chunk."""

    def __init__(self, port, ctx, path, token=TOKEN, timeout=5.0):
        s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
        self.sock = ctx.wrap_socket(s, server_hostname="127.0.0.1")
        req = "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nAccept: application/json\r\n" % (path, port)
        if token is not None:
            req += "Authorization: Bearer %s\r\n" % token
        self.sock.sendall((req + "\r\n").encode())
        self.f = self.sock.makefile("rb")
        status = self.f.readline()
        if not status:
            raise Truncated("no response")
        self.status = int(status.split()[1])
        self.headers = {}
        while True:
            line = self.f.readline()
            if line in (b"\r\n", b"\n", b""):
                break
            k, _, v = line.decode().partition(":")
            self.headers[k.strip().lower()] = v.strip()
        self.ended = False
        self.buf = b""

    def body(self):
        n = int(self.headers.get("content-length", "0"))
        return self.f.read(n)

    def chunk(self):
        """Next chunk's payload; b"" for the terminating chunk; Truncated if the connection ends first."""
        line = self.f.readline()
        if not line:
            raise Truncated("connection closed before a chunk header")
        size = int(line.strip().split(b";")[0], 16)
        if size == 0:
            self.f.readline()
            self.ended = True
            return b""
        data = self.f.read(size)
        if len(data) < size:
            raise Truncated("connection closed inside a chunk", data)
        assert self.f.read(2) == b"\r\n", "chunk not followed by CRLF"
        return data

    def chunks(self):
        """All chunks up to the terminating one."""
        out = []
        while True:
            c = self.chunk()
            if c == b"":
                return out
            out.append(c)

    def line(self):
        """Next newline-terminated line of the body (without the newline); None at the end."""
        while b"\n" not in self.buf:
            c = self.chunk()
            if c == b"":
                assert self.buf == b"", "stream ended inside a line: %r" % self.buf[:200]
                return None
            self.buf += c
        line, _, self.buf = self.buf.partition(b"\n")
        return line

    def events(self, n=None):
        """Parsed events until the stream ends (or n of them)."""
        out = []
        while n is None or len(out) < n:
            line = self.line()
            if line is None:
                break
            out.append(json.loads(line))
        return out

    def close(self):
        for c in (self.f, self.sock):  # the makefile() reader holds the fd open too
            try:
                c.close()
            except OSError:
                pass


class Server:
    """A fakeapi.py subprocess on ephemeral ports."""

    def __init__(self, certs, tmp, args=()):
        self.certs = certs
        self.token_file = str(tmp / "token")
        self.ready_file = str(tmp / "ready.json")
        self.stderr_path = str(tmp / "fakeapi.stderr")
        self.err = open(self.stderr_path, "wb")
        cmd = [
            PYTHON,
            FAKEAPI,
            "--certs",
            str(certs),
            "--client-ca",
            str(certs / "ca.crt"),
            "--token-file",
            self.token_file,
            "--token",
            TOKEN,
            "--ready-file",
            self.ready_file,
            "--bookmark-interval",
            "0",
        ] + list(args)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self.err)
        r, _, _ = select.select([self.proc.stdout], [], [], 10)
        if not r:
            self.stop()
            raise AssertionError("fakeapi did not become ready: %s" % self.log())
        line = self.proc.stdout.readline()
        if not line:
            self.proc.wait(5)
            raise AssertionError("fakeapi exited %s: %s" % (self.proc.returncode, self.log()))
        self.ready = json.loads(line)
        self.port = self.ready["port"]
        self.cport = self.ready["control_port"]
        self.streams = []

    def log(self):
        self.err.flush()
        with open(self.stderr_path, "rb") as f:
            return f.read().decode(errors="replace")[-4000:]

    def stop(self):
        for s in self.streams:
            s.close()
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(5)
        self.proc.stdout.close()
        self.err.close()

    # control API
    def ctl(self, method, path, body=None, expect=None):
        conn = http.client.HTTPConnection("127.0.0.1", self.cport, timeout=10)
        try:
            data = json.dumps(body) if body is not None else None
            conn.request(method, path, body=data, headers={"Content-Type": "application/json"})
            r = conn.getresponse()
            obj = json.loads(r.read() or b"null")
        finally:
            conn.close()
        if expect is not None:
            assert r.status == expect, "%s %s -> %d %s" % (method, path, r.status, obj)
        return obj

    def pod(self, name, node="n1", ns="default", **kw):
        kw.update(name=name, namespace=ns, node=node)
        return self.ctl("POST", "/pods", kw, expect=201)

    def rv(self):
        return int(self.ctl("GET", "/state", expect=200)["resourceVersion"])

    def stats(self, **q):
        return self.ctl("GET", "/stats?" + urllib.parse.urlencode(q), expect=200)

    def fault(self, **spec):
        return self.ctl("POST", "/faults", spec, expect=201)

    def wait_watches(self, n):
        wait_for(lambda: self.ctl("GET", "/state")["active_watches"] == n, what="%d active watches" % n)

    def finish(self, n=1):
        """End the n open watch streams cleanly, after what is already in the log was sent."""
        self.wait_watches(n)
        self.ctl("POST", "/watches/close", {"how": "end"}, expect=200)

    # API port
    def ctx(self, ca="ca.crt", cert=None):
        c = ssl.create_default_context(cafile=str(self.certs / ca))
        if cert:
            c.load_cert_chain(str(self.certs / (cert + ".crt")), str(self.certs / (cert + ".key")))
        return c

    def api(self, method, path, token=TOKEN, body=None, ctx=None, headers=None, timeout=10):
        conn = http.client.HTTPSConnection("127.0.0.1", self.port, context=ctx or self.ctx(), timeout=timeout)
        try:
            h = {"Accept": "application/json"}
            if token is not None:
                h["Authorization"] = "Bearer " + token
            if body is not None:
                h["Content-Type"] = "application/json"
            h.update(headers or {})
            conn.request(method, path, body=json.dumps(body) if body is not None else None, headers=h)
            r = conn.getresponse()
            raw = r.read()
            try:
                obj = json.loads(raw)
            except ValueError:
                obj = raw
            return r.status, {k.lower(): v for k, v in r.getheaders()}, obj
        finally:
            conn.close()

    def watch(self, query, token=TOKEN, ctx=None, timeout=5.0, path="/api/v1/pods"):
        s = RawStream(self.port, ctx or self.ctx(), path + "?watch=1&" + query, token, timeout)
        self.streams.append(s)
        return s


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    d = tmp_path_factory.mktemp("certs")
    subprocess.run(["bash", GENCERTS, str(d)], check=True, capture_output=True)
    return d


@pytest.fixture
def make_server(certs, tmp_path):
    servers = []

    def make(*args):
        d = tmp_path / ("srv%d" % len(servers))
        d.mkdir()
        s = Server(certs, d, args)
        servers.append(s)
        return s

    yield make
    for s in servers:
        s.stop()


@pytest.fixture
def srv(make_server):
    return make_server()


def names(items):
    return [i["metadata"]["name"] for i in items]


# ---------------------------------------------------------------- basics


def test_ready_line_and_ready_file(srv):
    with open(srv.ready_file) as f:
        assert json.loads(f.read()) == srv.ready
    assert srv.port != srv.cport and srv.port > 0 and srv.cport > 0
    with open(srv.token_file) as f:
        assert f.read().strip() == TOKEN
    assert srv.ctl("GET", "/healthz", expect=200) == {"ok": True}


def test_list_returns_only_pods_of_the_node(srv):
    srv.pod("a", "n1")
    srv.pod("b", "n2")
    srv.pod("c", "n1", ns="other", annotations={"ai.workload": "inference"}, podIPs=["10.1.0.3", "fd00::3"])
    srv.pod("d", "")  # unscheduled
    code, hdrs, body = srv.api("GET", "/api/v1/pods?" + NODE_SEL)
    assert code == 200 and hdrs["content-type"] == "application/json"
    assert body["kind"] == "PodList" and body["apiVersion"] == "v1"
    assert body["metadata"]["resourceVersion"] == str(srv.rv())
    assert sorted(names(body["items"])) == ["a", "c"]
    c = [i for i in body["items"] if i["metadata"]["name"] == "c"][0]
    assert c["metadata"]["namespace"] == "other"
    assert c["metadata"]["annotations"] == {"ai.workload": "inference"}
    assert c["status"]["podIPs"] == [{"ip": "10.1.0.3"}, {"ip": "fd00::3"}] and c["status"]["podIP"] == "10.1.0.3"
    assert c["spec"]["nodeName"] == "n1" and c["metadata"]["uid"]
    # namespaced list and unsupported selectors
    code, _, body = srv.api("GET", "/api/v1/namespaces/other/pods?" + NODE_SEL)
    assert code == 200 and names(body["items"]) == ["c"]
    code, _, body = srv.api("GET", "/api/v1/pods?fieldSelector=spec.bogus%3Dx")
    assert code == 400 and body["kind"] == "Status" and "field label not supported" in body["message"]
    code, _, body = srv.api("GET", "/api/v1/pods?resourceVersion=abc")
    assert code == 400


def test_list_limit_and_continue_is_a_consistent_snapshot(srv):
    for i in range(5):
        srv.pod("p%d" % i)
    code, _, page = srv.api("GET", "/api/v1/pods?%s&limit=2" % NODE_SEL)
    assert code == 200 and names(page["items"]) == ["p0", "p1"]
    rv = page["metadata"]["resourceVersion"]
    assert page["metadata"]["remainingItemCount"] == 3
    srv.pod("p10")  # created after the first page: must not show up
    srv.ctl("DELETE", "/pods/default/p3", expect=200)  # deleted after: must still show up
    got = names(page["items"])
    while "continue" in page["metadata"]:
        cont = urllib.parse.quote(page["metadata"]["continue"])
        code, _, page = srv.api("GET", "/api/v1/pods?%s&limit=2&continue=%s" % (NODE_SEL, cont))
        assert code == 200 and page["metadata"]["resourceVersion"] == rv
        got += names(page["items"])
    assert got == ["p0", "p1", "p2", "p3", "p4"]
    # a continue token from before the compaction point is gone
    code, _, first = srv.api("GET", "/api/v1/pods?%s&limit=1" % NODE_SEL)
    srv.pod("p11")
    srv.ctl("POST", "/compact", {}, expect=200)
    cont = urllib.parse.quote(first["metadata"]["continue"])
    code, _, body = srv.api("GET", "/api/v1/pods?%s&limit=1&continue=%s" % (NODE_SEL, cont))
    assert code == 410 and body["reason"] == "Expired"


def test_get_pod_and_not_found(srv):
    srv.pod("web", "n1", ns="ns1")
    code, _, pod = srv.api("GET", "/api/v1/namespaces/ns1/pods/web")
    assert code == 200 and pod["kind"] == "Pod" and pod["metadata"]["name"] == "web"
    code, _, st = srv.api("GET", "/api/v1/namespaces/ns1/pods/nope")
    assert code == 404
    assert st == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "nope" not found',
        "reason": "NotFound",
        "details": {"name": "nope", "kind": "pods"},
        "code": 404,
    }
    code, _, st = srv.api("GET", "/api/v1/nodes")
    assert code == 404 and st["kind"] == "Status"


def test_resource_versions_increase_across_pods_and_events(srv):
    rvs = [int(srv.pod("a")["resourceVersion"])]
    code, _, ev = srv.api("POST", "/api/v1/namespaces/default/events", body=core_event("e1"))
    assert code == 201
    rvs.append(int(ev["metadata"]["resourceVersion"]))
    rvs.append(int(srv.ctl("PATCH", "/pods/default/a", {"annotations": {"x": "1"}}, expect=200)["resourceVersion"]))
    rvs.append(int(srv.ctl("DELETE", "/pods/default/a", expect=200)["resourceVersion"]))
    assert rvs == sorted(rvs) and len(set(rvs)) == 4
    assert srv.rv() == rvs[-1]


# ---------------------------------------------------------------- watch


def test_watch_replays_events_after_resource_version(srv):
    srv.pod("p1")
    r0 = srv.rv()
    srv.pod("p2")
    srv.ctl("PATCH", "/pods/default/p1", {"annotations": {"ai.workload": "training"}}, expect=200)
    srv.pod("elsewhere", "n2")
    srv.ctl("DELETE", "/pods/default/p2", expect=200)
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, r0))
    srv.finish()
    assert w.status == 200
    assert w.headers["transfer-encoding"] == "chunked" and w.headers["content-type"] == "application/json"
    evs = w.events()
    assert w.ended, "stream must end with the terminating chunk"
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [
        ("ADDED", "p2"),
        ("MODIFIED", "p1"),
        ("DELETED", "p2"),
    ]
    rvs = [int(e["object"]["metadata"]["resourceVersion"]) for e in evs]
    assert rvs == sorted(rvs) and rvs[0] > r0
    assert evs[1]["object"]["metadata"]["annotations"] == {"ai.workload": "training"}


def test_watch_live_events_follow_field_selector_transitions(srv):
    r0 = srv.rv()
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, r0))
    srv.wait_watches(1)
    srv.pod("pending", "")  # not on n1 yet
    srv.ctl("PATCH", "/pods/default/pending", {"node": "n1"}, expect=200)  # scheduled: ADDED for n1
    srv.ctl("PATCH", "/pods/default/pending", {"podIP": "10.2.0.9"}, expect=200)
    srv.ctl("DELETE", "/pods/default/pending?graceful=1", expect=200)
    evs = w.events(4)
    assert [e["type"] for e in evs] == ["ADDED", "MODIFIED", "MODIFIED", "DELETED"]
    assert evs[1]["object"]["status"]["podIP"] == "10.2.0.9"
    assert "deletionTimestamp" in evs[2]["object"]["metadata"]
    # leaving the selector is a DELETED with the old content at the new resourceVersion
    srv.pod("mover", "n1")
    moved = srv.ctl("PATCH", "/pods/default/mover", {"node": "n2", "podIP": "10.2.0.10"}, expect=200)
    add, gone = w.events(2)
    assert (add["type"], gone["type"]) == ("ADDED", "DELETED")
    assert gone["object"]["spec"]["nodeName"] == "n1" and "podIP" not in gone["object"]["status"]
    assert gone["object"]["metadata"]["resourceVersion"] == moved["resourceVersion"]
    srv.ctl("POST", "/watches/close", {"how": "end"}, expect=200)
    assert w.line() is None and w.ended


def test_watch_from_zero_starts_with_synthetic_adds(srv):
    srv.pod("a")
    srv.pod("b")
    srv.pod("c", "n2")
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    srv.finish()
    evs = w.events()
    assert [(e["type"], e["object"]["metadata"]["name"]) for e in evs] == [("ADDED", "a"), ("ADDED", "b")]


def test_periodic_bookmarks_only_when_asked(srv):
    srv.ctl("PUT", "/config", {"bookmark_interval": 0.2}, expect=200)
    srv.pod("a")
    rv = srv.rv()
    w = srv.watch("%s&resourceVersion=%d&allowWatchBookmarks=true&timeoutSeconds=1" % (NODE_SEL, rv))
    evs = w.events()
    bms = [e for e in evs if e["type"] == "BOOKMARK"]
    assert len(bms) >= 3 and len(bms) == len(evs)
    for b in bms:
        assert b["object"]["kind"] == "Pod" and b["object"]["apiVersion"] == "v1"
        assert b["object"]["metadata"]["resourceVersion"] == str(rv)
        assert b["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}
    w2 = srv.watch("%s&resourceVersion=%d&timeoutSeconds=1" % (NODE_SEL, rv))
    assert w2.events() == []


def test_bookmark_rv_follows_changes_on_other_nodes(srv):
    r0 = srv.rv()
    w = srv.watch("%s&resourceVersion=%d&allowWatchBookmarks=1" % (NODE_SEL, r0))
    srv.wait_watches(1)
    srv.pod("x", "n2")
    wait_for(lambda: srv.ctl("GET", "/state")["watches"][0]["cursor"] == str(srv.rv()), what="watch caught up")
    srv.ctl("POST", "/bookmark", expect=200)
    ev = w.events(1)[0]
    assert ev["type"] == "BOOKMARK" and ev["object"]["metadata"]["resourceVersion"] == str(srv.rv())


def test_bookmark_now_and_drop_bookmarks(srv):
    rv = srv.rv()
    q = "%s&resourceVersion=%d&allowWatchBookmarks=true" % (NODE_SEL, rv)
    srv.fault(type="drop-bookmarks")
    dropped = srv.watch(q + "&timeoutSeconds=1")
    srv.wait_watches(1)
    normal = srv.watch(q)
    srv.wait_watches(2)
    assert srv.ctl("POST", "/bookmark", expect=200) == {"watches": 2}
    ev = normal.events(1)[0]
    assert ev["type"] == "BOOKMARK" and ev["object"]["metadata"]["resourceVersion"] == str(rv)
    assert dropped.events() == []  # ends at timeoutSeconds without any bookmark
    assert srv.ctl("GET", "/faults")["faults"] == []  # count 1 was used up by the first watch


def test_timeout_seconds_ends_stream_cleanly(srv):
    t = time.monotonic()
    w = srv.watch("%s&resourceVersion=%d&timeoutSeconds=1" % (NODE_SEL, srv.rv()))
    assert w.chunks() == [] and w.ended
    took = time.monotonic() - t
    assert 0.9 <= took < 2.5
    rec = srv.stats(kind="watch")["requests"][-1]
    assert rec["end"] == "timeout" and rec["status"] == 200


def test_watch_from_compacted_rv_gets_410_error_event(srv):
    srv.pod("a")
    old = srv.rv()
    srv.pod("b")
    srv.pod("c")
    comp = srv.ctl("POST", "/compact", {"resourceVersion": str(srv.rv() - 1)}, expect=200)["compacted"]
    w = srv.watch("%s&resourceVersion=%d&allowWatchBookmarks=true" % (NODE_SEL, old))
    assert w.status == 200
    evs = w.events()
    assert w.ended
    assert evs == [
        {
            "type": "ERROR",
            "object": {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Failure",
                "message": "too old resource version: %d (%s)" % (old, comp),
                "reason": "Expired",
                "code": 410,
            },
        }
    ]
    # from the compaction point itself the history is still there
    w = srv.watch("%s&resourceVersion=%s" % (NODE_SEL, comp))
    srv.finish()
    assert [e["object"]["metadata"]["name"] for e in w.events()] == ["c"]


def test_bounded_log_compacts_oldest(srv):
    srv.ctl("PUT", "/config", {"max_log": 2}, expect=200)
    start = srv.rv()
    for i in range(4):
        srv.pod("p%d" % i)
    st = srv.ctl("GET", "/state")
    assert st["log_entries"] == 2 and int(st["compactedResourceVersion"]) == start + 2
    evs = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, start)).events()
    assert evs[0]["type"] == "ERROR" and evs[0]["object"]["code"] == 410


def test_watches_close_end_and_rst(srv):
    a = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    srv.wait_watches(1)
    srv.ctl("POST", "/watches/close", {"how": "end"}, expect=200)
    assert a.chunks() == [] and a.ended
    b = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    srv.wait_watches(1)
    srv.ctl("POST", "/watches/close", {"how": "rst"}, expect=200)
    with pytest.raises((Truncated, ConnectionResetError, ssl.SSLError)):
        b.chunks()
    assert not b.ended


# ---------------------------------------------------------------- faults


def test_fault_gone_as_http_status(srv):
    f = srv.fault(type="gone")
    assert f["mode"] == "http" and f["match"] == "watch" and f["count"] == 1
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    assert w.status == 410
    st = json.loads(w.body())
    assert st["kind"] == "Status" and st["reason"] == "Expired" and st["code"] == 410
    assert "too old resource version" in st["message"]
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    srv.finish()
    assert w.status == 200 and w.events() == []
    code, _, _ = srv.api("GET", "/api/v1/pods?" + NODE_SEL)  # lists were never affected
    assert code == 200


def test_fault_gone_as_error_event_mid_stream(srv):
    r0 = srv.rv()
    srv.pod("a")
    srv.pod("b")
    srv.fault(type="gone", mode="event", after_events=1)
    evs = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, r0)).events()
    assert [e["type"] for e in evs] == ["ADDED", "ERROR"]
    assert evs[1]["object"]["code"] == 410 and evs[1]["object"]["reason"] == "Expired"
    assert srv.stats(kind="watch")["requests"][-1]["end"] == "gone"


@pytest.mark.parametrize("code,reason", [(429, "TooManyRequests"), (500, "InternalError"), (503, "ServiceUnavailable")])
def test_fault_status_with_retry_after(srv, code, reason):
    srv.fault(type="status", code=code, retry_after=3, match="list", count=2)
    for _ in range(2):
        got, hdrs, st = srv.api("GET", "/api/v1/pods?" + NODE_SEL)
        assert got == code and hdrs["retry-after"] == "3"
        assert st["kind"] == "Status" and st["code"] == code and st["reason"] == reason
        assert st["details"] == {"retryAfterSeconds": 3}
    got, hdrs, _ = srv.api("GET", "/api/v1/pods?" + NODE_SEL)
    assert got == 200 and "retry-after" not in hdrs
    recs = srv.stats(kind="list")["requests"]
    assert [r["status"] for r in recs] == [code, code, 200]
    assert [bool(r["faults"]) for r in recs] == [True, True, False]
    assert recs[0]["t"] <= recs[1]["t"] <= recs[2]["t"]


def test_fault_always_until_cleared_and_match_filters(srv):
    f = srv.fault(type="status", code=503, count="always", match="list", node="n1")
    for _ in range(3):
        assert srv.api("GET", "/api/v1/pods?" + NODE_SEL)[0] == 503
    assert srv.api("GET", "/api/v1/pods?fieldSelector=spec.nodeName%3Dn2")[0] == 200  # other node
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    assert w.status == 200  # a watch is not a list
    srv.finish()
    assert w.events() == []
    [listed] = srv.ctl("GET", "/faults")["faults"]
    assert listed["id"] == f["id"] and listed["count"] == "always" and listed["hits"] == 3
    srv.ctl("DELETE", "/faults/%d" % f["id"], expect=200)
    assert srv.api("GET", "/api/v1/pods?" + NODE_SEL)[0] == 200


def test_fault_reset_cuts_the_connection_mid_event(srv):
    srv.pod("a", annotations={"k": "v" * 50})
    srv.pod("b", annotations={"k": "w" * 50})
    srv.fault(type="reset", after_events=1)
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    first = w.chunk()
    assert json.loads(first)["object"]["metadata"]["name"] == "a"
    _, _, b = srv.api("GET", "/api/v1/namespaces/default/pods/b")
    full = compact({"type": "ADDED", "object": b}) + b"\n"
    half = w.chunk()
    assert half == full[: len(full) // 2]
    with pytest.raises(Truncated):
        w.chunk()
    assert not w.ended
    assert srv.stats(kind="watch")["requests"][-1]["end"] == "reset"


def test_fault_reset_inside_a_chunk_and_with_rst(srv):
    srv.pod("a")
    srv.fault(type="reset", in_chunk=True)
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    with pytest.raises(Truncated) as ei:
        w.chunk()
    _, _, a = srv.api("GET", "/api/v1/namespaces/default/pods/a")
    full = compact({"type": "ADDED", "object": a}) + b"\n"
    assert ei.value.data == full[: len(full) // 2]
    srv.fault(type="reset", how="rst")
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    with pytest.raises((Truncated, ConnectionResetError, ssl.SSLError)):
        w.chunks()
    assert not w.ended


def test_fault_slow_sends_byte_by_byte(srv):
    srv.pod("a")
    srv.fault(type="slow", mode="bytes", delay_ms=2)
    t = time.monotonic()
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL, timeout=10)
    srv.finish()
    chunks = w.chunks()
    assert all(len(c) == 1 for c in chunks)
    data = b"".join(chunks)
    assert data.endswith(b"\n") and json.loads(data)["object"]["metadata"]["name"] == "a"
    assert time.monotonic() - t >= len(chunks) * 0.002


def test_fault_slow_splits_each_event_in_three_chunks(srv):
    srv.pod("a")
    srv.pod("b")
    srv.fault(type="slow", mode="split", pieces=3)
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    srv.finish()
    chunks = w.chunks()
    assert len(chunks) == 6
    for i in (0, 3):
        ev = b"".join(chunks[i : i + 3])
        assert ev.count(b"\n") == 1 and ev.endswith(b"\n")
        assert all(b"\n" not in c for c in chunks[i : i + 2])
        json.loads(ev)


def test_fault_slow_coalesces_events_in_one_chunk(srv):
    for n in "abc":
        srv.pod(n)
    srv.fault(type="slow", mode="coalesce")
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    srv.finish()
    chunks = w.chunks()
    assert len(chunks) == 1
    lines = chunks[0].split(b"\n")
    assert lines[-1] == b"" and [json.loads(x)["object"]["metadata"]["name"] for x in lines[:-1]] == ["a", "b", "c"]


def test_fault_slow_pattern_cuts_across_event_boundaries(srv):
    for n in "abc":
        srv.pod(n)
    srv.fault(type="slow", mode="pattern", chunk_sizes=[100, 37])
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    srv.finish()
    chunks = w.chunks()
    sizes = [len(c) for c in chunks]
    assert len(sizes) > 4
    for i, s in enumerate(sizes[:-1]):
        assert s == (100 if i % 2 == 0 else 37)
    assert sizes[-1] <= (100 if (len(sizes) - 1) % 2 == 0 else 37)
    assert any(b"\n" in c[:-1] for c in chunks), "some chunk must hold the end of one event and the start of the next"
    data = b"".join(chunks)
    assert [json.loads(x)["object"]["metadata"]["name"] for x in data.split(b"\n")[:-1]] == ["a", "b", "c"]


def test_fault_garbage_line_then_normal_events(srv):
    srv.pod("a")
    srv.pod("b")
    srv.fault(type="garbage", after_events=1)
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL)
    srv.finish()
    lines = []
    while True:
        line = w.line()
        if line is None:
            break
        lines.append(line)
    assert lines[1] == b"{not json"
    assert [json.loads(x)["object"]["metadata"]["name"] for x in (lines[0], lines[2])] == ["a", "b"]
    assert len(lines) == 3


def test_fault_oversized_event_then_normal_events(srv):
    r0 = srv.rv()
    srv.fault(type="oversized", bytes=2 * 1024 * 1024)
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, r0), timeout=10)
    srv.wait_watches(1)
    big = w.line()
    assert len(big) > 2 * 1024 * 1024
    ev = json.loads(big)
    assert ev["type"] == "MODIFIED" and ev["object"]["spec"]["nodeName"] == "n1"
    assert len(ev["object"]["metadata"]["annotations"]["aiqos.test/padding"]) == 2 * 1024 * 1024
    srv.pod("after")
    ev = w.events(1)[0]
    assert ev["type"] == "ADDED" and ev["object"]["metadata"]["name"] == "after"


def test_fault_hang_until_released(srv):
    srv.fault(type="hang", match="list")
    t = time.monotonic()
    with pytest.raises(socket.timeout):
        srv.api("GET", "/api/v1/pods?" + NODE_SEL, timeout=0.5)
    assert time.monotonic() - t >= 0.45
    # an 'always' hang holds every request until the fault is cleared
    f = srv.fault(type="hang", match="list", count="always")
    sock = srv.ctx().wrap_socket(socket.create_connection(("127.0.0.1", srv.port), timeout=5), server_hostname="127.0.0.1")
    sock.sendall(b"GET /api/v1/pods HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n" % TOKEN.encode())
    sock.settimeout(0.3)
    with pytest.raises(socket.timeout):
        sock.recv(1)
    srv.ctl("DELETE", "/faults/%d" % f["id"], expect=200)
    sock.settimeout(3)
    assert sock.recv(1) == b""  # released: closed without an answer
    sock.close()
    assert srv.api("GET", "/api/v1/pods?" + NODE_SEL)[0] == 200


def test_fault_hang_at_connect_blocks_tls_handshake(srv):
    srv.fault(type="hang", stage="connect")
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=0.5)
    with pytest.raises(socket.timeout):
        srv.ctx().wrap_socket(raw, server_hostname="127.0.0.1")
    raw.close()
    assert srv.api("GET", "/api/v1/pods?" + NODE_SEL)[0] == 200  # count 1: the next connection is normal


def test_fault_hang_after_headers(srv):
    srv.fault(type="hang", stage="headers", seconds=0.5)
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    assert w.status == 200
    t = time.monotonic()
    with pytest.raises(Truncated):
        w.chunk()
    assert time.monotonic() - t >= 0.4


def test_list_faults_reset_garbage_oversized(srv):
    srv.pod("a")
    srv.fault(type="garbage", match="list")
    code, _, body = srv.api("GET", "/api/v1/pods?" + NODE_SEL)
    assert code == 200 and body == b"{not json\n"
    srv.fault(type="oversized", match="list", bytes=1024 * 1024)
    code, _, body = srv.api("GET", "/api/v1/pods?" + NODE_SEL)
    assert names(body["items"]) == ["a", "oversized"]
    srv.fault(type="reset", match="list")
    with pytest.raises((http.client.IncompleteRead, http.client.HTTPException, ConnectionError, ssl.SSLError)):
        srv.api("GET", "/api/v1/pods?" + NODE_SEL)


def test_fault_validation(srv):
    for bad in (
        {"type": "nope"},
        {"type": "status", "code": 200},
        {"type": "status", "count": 0},
        {"type": "slow", "mode": "warp"},
        {"type": "garbage", "match": "get"},
        {"type": "reset", "colour": "red"},
    ):
        err = srv.ctl("POST", "/faults", bad, expect=400)
        assert err["error"]
    assert srv.ctl("GET", "/faults")["faults"] == []


# ---------------------------------------------------------------- auth and TLS


def test_wrong_or_missing_token_is_401(srv):
    for token in ("wrong", None):
        code, _, st = srv.api("GET", "/api/v1/pods?" + NODE_SEL, token=token)
        assert code == 401
        assert st == {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": "Unauthorized",
            "reason": "Unauthorized",
            "code": 401,
        }
    w = srv.watch("%s&resourceVersion=0" % NODE_SEL, token="wrong")
    assert w.status == 401
    s = srv.stats()
    assert s["counts"]["unauthorized"] == 3
    assert [r["auth"] for r in s["requests"]] == ["invalid-token", "none", "invalid-token"]


def test_token_rotation_is_read_on_every_request(srv):
    assert srv.api("GET", "/api/v1/pods")[0] == 200
    rot = srv.ctl("POST", "/token/rotate", {}, expect=200)
    new = rot["token"]
    assert rot["tokens"] == [new] and new != TOKEN
    assert srv.api("GET", "/api/v1/pods")[0] == 401
    assert srv.api("GET", "/api/v1/pods", token=new)[0] == 200
    # overlap: both valid during a grace period
    rot2 = srv.ctl("POST", "/token/rotate", {"keep_old": True}, expect=200)
    assert srv.api("GET", "/api/v1/pods", token=new)[0] == 200
    assert srv.api("GET", "/api/v1/pods", token=rot2["token"])[0] == 200
    # a rotation done by someone else (kubelet rewriting the projected token)
    with open(srv.token_file + ".new", "w") as f:
        f.write("external\n")
    os.replace(srv.token_file + ".new", srv.token_file)
    assert srv.api("GET", "/api/v1/pods", token="external")[0] == 200
    assert srv.api("GET", "/api/v1/pods", token=new)[0] == 401
    srv.ctl("PUT", "/token", {"token": "set-by-test"}, expect=200)
    assert srv.api("GET", "/api/v1/pods", token="set-by-test")[0] == 200
    recs = srv.stats(kind="list")["requests"]
    assert [(r["token"], r["auth"]) for r in recs] == [
        (TOKEN, "token"),
        (TOKEN, "invalid-token"),
        (new, "token"),
        (new, "token"),
        (rot2["token"], "token"),
        ("external", "token"),
        (new, "invalid-token"),
        ("set-by-test", "token"),
    ]


def test_client_certificate_auth(srv):
    code, _, body = srv.api("GET", "/api/v1/pods?" + NODE_SEL, token=None, ctx=srv.ctx(cert="client"))
    assert code == 200 and body["kind"] == "PodList"
    rec = srv.stats()["requests"][-1]
    assert rec["auth"] == "cert" and rec["user"] == "aiqos-test-client"
    # a certificate from an unrelated CA is refused during the handshake
    with pytest.raises((ssl.SSLError, ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected)):
        srv.api("GET", "/api/v1/pods", token=None, ctx=srv.ctx(cert="other-client"))
    wait_for(lambda: srv.stats()["counts"].get("tls_failure", 0) >= 1, what="server-side TLS failure")
    assert len(srv.stats(kind="list")["requests"]) == 1


def test_tls_verification_failures(make_server, certs):
    srv = make_server()
    with pytest.raises(ssl.SSLCertVerificationError):
        srv.api("GET", "/api/v1/pods", ctx=srv.ctx(ca="other-ca.crt"))
    other = make_server("--cert", str(certs / "other-server.crt"), "--key", str(certs / "other-server.key"))
    with pytest.raises(ssl.SSLCertVerificationError):
        other.api("GET", "/api/v1/pods")
    assert other.api("GET", "/api/v1/pods", ctx=other.ctx(ca="other-ca.crt"))[0] == 200
    wrong = make_server("--cert", str(certs / "wronghost.crt"), "--key", str(certs / "wronghost.key"))
    with pytest.raises(ssl.SSLCertVerificationError, match="(?i)hostname|IP address mismatch"):
        wrong.api("GET", "/api/v1/pods")


def test_tls_versions(srv):
    ctx = srv.ctx()
    ctx.maximum_version = ssl.TLSVersion.TLSv1_2
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    with ctx.wrap_socket(raw, server_hostname="127.0.0.1") as s:
        assert s.version() == "TLSv1.2"
    old = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    old.load_verify_locations(str(srv.certs / "ca.crt"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        old.set_ciphers("DEFAULT:@SECLEVEL=0")  # let this client offer TLS 1.1, so the refusal is the server's
        old.minimum_version = ssl.TLSVersion.TLSv1_1
        old.maximum_version = ssl.TLSVersion.TLSv1_1
    raw = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
    with pytest.raises(ssl.SSLError, match="PROTOCOL_VERSION"):
        old.wrap_socket(raw, server_hostname="127.0.0.1")
    raw.close()
    wait_for(lambda: any("UNSUPPORTED_PROTOCOL" in e for e in srv.stats()["tls_errors"]), what="server refused TLS 1.1")


# ---------------------------------------------------------------- events


def core_event(name, ns="default", pod="web", **kw):
    ev = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": ns},
        "involvedObject": {"kind": "Pod", "namespace": ns, "name": pod, "apiVersion": "v1"},
        "reason": "Tuned",
        "message": "class inference",
        "type": "Normal",
        "source": {"component": "aiqos-agent", "host": "n1"},
        "count": 1,
    }
    ev.update(kw)
    return ev


def test_core_v1_events(srv):
    base = "/api/v1/namespaces/default/events"
    code, _, ev = srv.api("POST", base, body=core_event("web.1"))
    assert code == 201 and ev["kind"] == "Event" and ev["metadata"]["uid"] and ev["metadata"]["resourceVersion"]
    code, _, st = srv.api("POST", base, body=core_event("web.1"))
    assert code == 409 and st["reason"] == "AlreadyExists"
    gen = core_event("", pod="db")
    gen["metadata"] = {"generateName": "db."}
    code, _, ev2 = srv.api("POST", base, body=gen)
    assert code == 201 and ev2["metadata"]["name"].startswith("db.")
    code, _, st = srv.api("POST", "/api/v1/namespaces/other/events", body=core_event("x"))
    assert code == 400 and "does not match the namespace" in st["message"]
    bad = core_event("y")
    bad["involvedObject"]["namespace"] = "elsewhere"
    code, _, st = srv.api("POST", base, body=bad)
    assert code == 422 and st["reason"] == "Invalid" and "involvedObject.namespace" in st["message"]
    code, _, ev = srv.api(
        "PATCH", base + "/web.1", body={"count": 2}, headers={"Content-Type": "application/strategic-merge-patch+json"}
    )
    assert code == 200 and ev["count"] == 2 and ev["reason"] == "Tuned"
    code, _, lst = srv.api("GET", base)
    assert code == 200 and lst["kind"] == "EventList" and sorted(names(lst["items"])) == sorted(["web.1", ev2["metadata"]["name"]])
    code, _, lst = srv.api("GET", base + "?fieldSelector=" + urllib.parse.quote("involvedObject.name=db"))
    assert names(lst["items"]) == [ev2["metadata"]["name"]]
    assert srv.stats()["counts"]["event_create"] == 5
    assert [e["metadata"]["name"] for e in srv.ctl("GET", "/events")["items"]] == ["web.1", ev2["metadata"]["name"]]


def test_events_k8s_io_v1(srv):
    base = "/apis/events.k8s.io/v1/namespaces/default/events"
    ev = {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": "web.2"},
        "regarding": {"kind": "Pod", "namespace": "default", "name": "web", "apiVersion": "v1"},
        "reason": "TuneDegraded",
        "note": "fq_codel missing; fell back to pfifo",
        "type": "Warning",
        "action": "Tune",
        "reportingController": "aiqos.dev/agent",
        "reportingInstance": "aiqos-agent-n1",
        "eventTime": "2025-01-01T00:00:00.000000Z",
    }
    code, _, got = srv.api("POST", base, body=ev)
    assert code == 201 and got["apiVersion"] == "events.k8s.io/v1" and got["note"] == ev["note"]
    missing = dict(ev, metadata={"name": "web.3"})
    del missing["eventTime"]
    code, _, st = srv.api("POST", base, body=missing)
    assert code == 422 and "eventTime" in st["message"]
    code, _, st = srv.api("POST", base, body=dict(ev, metadata={"name": "web.4"}, type="Bad"))
    assert code == 422 and "type" in st["message"]
    code, _, core = srv.api("GET", "/api/v1/namespaces/default/events/web.2")
    assert code == 200 and core["involvedObject"]["name"] == "web" and core["message"] == ev["note"]
    assert core["reportingComponent"] == "aiqos.dev/agent"
    code, _, lst = srv.api("GET", base)
    assert code == 200 and lst["apiVersion"] == "events.k8s.io/v1" and lst["items"][0]["regarding"]["name"] == "web"


def test_keep_alive_and_chunked_request_body(srv):
    conn = http.client.HTTPSConnection("127.0.0.1", srv.port, context=srv.ctx(), timeout=5)
    try:
        auth = {"Authorization": "Bearer " + TOKEN, "Content-Type": "application/json"}
        conn.request("GET", "/api/v1/pods?" + NODE_SEL, headers=auth)
        r = conn.getresponse()
        assert r.status == 200 and json.loads(r.read())["kind"] == "PodList"
        conn.request("GET", "/api/v1/pods", headers={"Authorization": "Bearer wrong"})
        r = conn.getresponse()
        assert r.status == 401 and json.loads(r.read())["code"] == 401
        body = iter([compact(core_event("chunked"))[:40], compact(core_event("chunked"))[40:]])
        conn.request("POST", "/api/v1/namespaces/default/events", body=body, headers=auth, encode_chunked=True)
        r = conn.getresponse()
        assert r.status == 201 and json.loads(r.read())["metadata"]["name"] == "chunked"
    finally:
        conn.close()
    clients = {r["client"] for r in srv.stats()["requests"]}
    assert len(clients) == 1, "all three requests must have used one connection: %s" % clients


def test_client_disconnect_frees_the_watch(srv):
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    srv.wait_watches(1)
    w.close()
    srv.wait_watches(0)
    assert srv.stats(kind="watch")["requests"][-1]["end"] == "client-gone"


def test_request_body_limit(srv):
    srv.ctl("PUT", "/config", {"max_body_bytes": 1000}, expect=200)
    code, hdrs, st = srv.api("POST", "/api/v1/namespaces/default/events", body=core_event("big", message="m" * 2000))
    assert code == 413 and st["code"] == 413


# ---------------------------------------------------------------- control API, stats, lifecycle


def test_control_api_errors(srv):
    assert "unknown compact pod keys" in srv.ctl("POST", "/pods", {"name": "a", "nodeName": "n1"}, expect=400)["error"]
    srv.pod("a")
    srv.ctl("POST", "/pods", {"name": "a", "node": "n1"}, expect=409)
    srv.ctl("DELETE", "/pods/default/zzz", expect=404)
    srv.ctl("PATCH", "/pods/default/zzz", {"node": "n1"}, expect=404)
    srv.ctl("POST", "/compact", {"resourceVersion": str(srv.rv() + 10)}, expect=400)
    srv.ctl("PUT", "/config", {"nope": 1}, expect=400)
    srv.ctl("GET", "/nothing", expect=404)
    # full pod JSON and bulk create
    full = {"metadata": {"name": "full", "namespace": "ns2", "annotations": {"ai.workload": "training"}}, "spec": {"nodeName": "n1"}}
    assert srv.ctl("PUT", "/pods", full, expect=201)["object"]["metadata"]["namespace"] == "ns2"
    bulk = srv.ctl("POST", "/pods", {"items": [{"name": "b%d" % i, "node": "n1"} for i in range(20)]}, expect=201)
    assert len(bulk["results"]) == 20
    assert len(srv.api("GET", "/api/v1/pods?" + NODE_SEL)[2]["items"]) == 22


def test_stats_records_queries_and_can_be_reset(srv):
    srv.api("GET", "/api/v1/pods?%s&limit=5" % NODE_SEL)
    srv.watch("%s&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1" % NODE_SEL).events()
    s = srv.stats()
    assert s["counts"]["list"] == 1 and s["counts"]["watch"] == 1
    lst, wat = s["requests"]
    assert lst["query"] == NODE_SEL + "&limit=5" and lst["params"]["fieldSelector"] == "spec.nodeName=n1"
    assert lst["auth"] == "token" and lst["status"] == 200
    assert wat["params"]["allowWatchBookmarks"] == "true" and wat["end"] == "timeout"
    assert srv.stats(since=lst["seq"])["requests"] == [wat]
    srv.ctl("DELETE", "/stats", expect=200)
    assert srv.stats()["requests"] == [] and srv.stats()["counts"] == {}


def test_sigterm_ends_streams_and_exits_cleanly(srv):
    w = srv.watch("%s&resourceVersion=%d" % (NODE_SEL, srv.rv()))
    srv.wait_watches(1)
    t = time.monotonic()
    srv.proc.send_signal(signal.SIGTERM)
    assert w.chunks() == [] and w.ended
    assert srv.proc.wait(5) == 0
    assert time.monotonic() - t < 3


def test_same_control_calls_give_same_answers(make_server):
    outputs = []
    for _ in range(2):
        s = make_server()
        s.pod("a", annotations={"ai.workload": "inference"}, podIP="10.0.0.1")
        s.pod("b", "n2")
        s.ctl("PATCH", "/pods/default/a", {"annotations": {"ai.workload": "training"}}, expect=200)
        s.ctl("DELETE", "/pods/default/b", expect=200)
        s.pod("b", "n1")
        _, _, lst = s.api("GET", "/api/v1/pods?" + NODE_SEL)
        lines = []
        w = s.watch("%s&resourceVersion=1" % NODE_SEL)
        s.finish()
        while True:
            line = w.line()
            if line is None:
                break
            lines.append(line)
        outputs.append((compact(lst), lines))
    assert outputs[0] == outputs[1]
    assert len(outputs[0][1]) == 3
