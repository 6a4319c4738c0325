# Kubernetes' identifier rules as the real kube-apiserver applies them: every
# case of test/unit/golden/k8s-names.txt (the table shared/k8s.c is unit
# tested against, test/unit/test_k8s.c) is created with dryRun=All — a
# namespace or a pod in "default" — and the server's verdict must be the
# table's: 201 (or 409, exists) for "valid", 422 naming metadata.name for
# "invalid".
import urllib.parse
from pathlib import Path

from kapi import pod
from test_manifests import plane, wait_for  # noqa: F401 - the module's control plane

TABLE = Path(__file__).resolve().parents[2] / "test" / "unit" / "golden" / "k8s-names.txt"
NODE = "aqt-names-node"


def cases():
    for line in TABLE.read_text().splitlines():
        if line and not line.startswith("#"):
            kind, want, value = line.split("\t")
            yield kind, want == "valid", value


def verdict(plane, kind, value):
    if kind == "namespace":
        path, obj = "/api/v1/namespaces?dryRun=All", {"apiVersion": "v1", "kind": "Namespace",
                                                       "metadata": {"name": value}}
    else:
        path, obj = "/api/v1/namespaces/default/pods?dryRun=All", pod("default", value, NODE)
    status, body = plane.admin.request("POST", path, obj)
    if status in (201, 409):  # 409: exists already ("default"): validation passed before that
        return True
    assert status == 422, (kind, value, status, body)
    causes = body.get("details", {}).get("causes", [])
    assert any(c.get("field") == "metadata.name" for c in causes), (kind, value, body)
    return False


def test_names_table_matches_the_api_server(plane):  # noqa: F811 - the fixture
    wait_for("the default ServiceAccount of namespace default",
             lambda: plane.admin.request("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200)
    wrong = []
    n = 0
    for kind, want, value in cases():
        n += 1
        got = verdict(plane, kind, value)
        if got != want:
            wrong.append("%s %r (%d chars): table says %s, the API server %s" % (
                kind, urllib.parse.quote(value[:40]), len(value), want, got))
    assert n >= 20
    assert not wrong, "\n".join(wrong)
