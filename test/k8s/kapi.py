# A minimal Kubernetes API client for the control-plane tests: one TLS
# connection per request (http.client + ssl, CA-verified), JSON in and out,
# and a watch reader that yields one decoded event per line of the stream.
import http.client
import json
import ssl
import urllib.parse


class ApiError(Exception):
    def __init__(self, status, body):
        super().__init__("HTTP %d: %s" % (status, body if isinstance(body, str) else json.dumps(body)[:500]))
        self.status = status
        self.body = body


class Api:
    def __init__(self, server, ca, cert=None, key=None, token=None):
        u = urllib.parse.urlsplit(server)
        assert u.scheme == "https", server
        self.host = u.hostname
        self.port = u.port or 443
        self.token = token
        self.ctx = ssl.create_default_context(cafile=ca)
        self.ctx.check_hostname = True
        if cert:
            self.ctx.load_cert_chain(cert, key)

    def _conn(self, timeout):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def _headers(self, body, content_type):
        h = {"Accept": "application/json"}
        if self.token:
            h["Authorization"] = "Bearer " + self.token
        if body is not None:
            h["Content-Type"] = content_type
        return h

    def request(self, method, path, body=None, content_type="application/json", timeout=30):
        """Returns (status, decoded JSON body or raw text)."""
        conn = self._conn(timeout)
        try:
            data = None if body is None else json.dumps(body).encode()
            conn.request(method, path, body=data, headers=self._headers(body, content_type))
            resp = conn.getresponse()
            raw = resp.read().decode()
            try:
                return resp.status, json.loads(raw)
            except ValueError:
                return resp.status, raw
        finally:
            conn.close()

    def ok(self, method, path, body=None, content_type="application/json", expect=(200, 201)):
        status, out = self.request(method, path, body, content_type)
        if status not in expect:
            raise ApiError(status, out)
        return out

    def get(self, path):
        return self.ok("GET", path)

    def create(self, path, obj):
        return self.ok("POST", path, obj)

    def watch(self, path, timeout=30):
        """Opens a watch; returns (status, iterator of events). A non-200 answer
        gives (status, [decoded body]). The iterator ends with the stream."""
        conn = self._conn(timeout)
        conn.request("GET", path, headers=self._headers(None, None))
        resp = conn.getresponse()
        if resp.status != 200:
            raw = resp.read().decode()
            conn.close()
            try:
                return resp.status, [json.loads(raw)]
            except ValueError:
                return resp.status, [raw]

        def events():
            try:
                while True:
                    line = resp.readline()
                    if not line:
                        return
                    line = line.strip()
                    if line:
                        yield json.loads(line)
            finally:
                conn.close()

        return resp.status, events()


def pod(namespace, name, node, annotations=None):
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations or {}},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "aiqos.invalid/none:0"}],
        },
    }


def q(**params):
    return urllib.parse.urlencode(params)
