# manifests/admission/ enforced by the real kube-apiserver
# (hack/control-plane.sh): the ValidatingAdmissionPolicy lets a pod claim
# ai.workload=<class> only in a namespace whose label aiqos.io/allowed-classes
# lists the class (dot-separated). Checked with real creates and patches:
#   - before the policy is applied every claim is admitted (the test can fail);
#   - after it: a listed class is admitted, an unlisted one and any class in an
#     unlabelled namespace are refused with the policy's message, pods without
#     the annotation are never affected, an invalid value is refused;
#   - UPDATE: changing the class needs the namespace's permission, keeping it
#     does not (a pod admitted before the label went away can still be patched);
#   - the policy type-checks without warnings against the pinned API.
import time

import pytest

from kapi import pod
from test_manifests import TOP, plane, wait_for  # noqa: F401 - plane is a fixture

NODE = "aqt-adm-node"
LABEL = "aiqos.io/allowed-classes"
NS = {"aqt-adm-inf": "inference", "aqt-adm-both": "inference.training", "aqt-adm-none": None}


def ns_obj(name, classes):
    labels = {LABEL: classes} if classes else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def try_create(plane, ns, name, annotations, dry_run=True):
    path = f"/api/v1/namespaces/{ns}/pods" + ("?dryRun=All" if dry_run else "")
    return plane.admin.request("POST", path, pod(ns, name, NODE, annotations))


def patch_annotations(plane, ns, name, annotations):
    return plane.admin.request("PATCH", f"/api/v1/namespaces/{ns}/pods/{name}",
                               {"metadata": {"annotations": annotations}},
                               content_type="application/merge-patch+json")


def message(body):
    return body.get("message", "") if isinstance(body, dict) else str(body)


@pytest.fixture(scope="module")
def namespaces(plane):  # noqa: F811 - the fixture imported above
    for name, classes in NS.items():
        status, body = plane.admin.request("POST", "/api/v1/namespaces", ns_obj(name, classes))
        assert status in (201, 409), body
    for name in NS:
        wait_for(f"the default ServiceAccount of {name}",
                 lambda name=name: plane.admin.request(
                     "GET", f"/api/v1/namespaces/{name}/serviceaccounts/default")[0] == 200, timeout=60)
    return plane


def test_admission_policy_allows_classes_per_namespace(namespaces):
    plane = namespaces
    train = {"ai.workload": "training"}
    inf = {"ai.workload": "inference"}
    # without the policy every claim is admitted
    status, body = try_create(plane, "aqt-adm-none", "p-before", inf)
    assert status == 201, body

    plane.k("apply", "--validate=strict", "-k", str(TOP / "manifests" / "admission"))
    # the API server picks a new policy up asynchronously
    wait_for("the policy to be enforced",
             lambda: try_create(plane, "aqt-adm-none", "p-probe", inf)[0] == 403, timeout=60, interval=0.5)

    cases = [
        ("aqt-adm-inf", inf, 201),
        ("aqt-adm-inf", train, 403),
        ("aqt-adm-inf", {}, 201),
        ("aqt-adm-inf", {"other": "x"}, 201),
        ("aqt-adm-inf", {"ai.workload": "inference-ish"}, 403),
        ("aqt-adm-both", inf, 201),
        ("aqt-adm-both", train, 201),
        ("aqt-adm-none", inf, 403),
        ("aqt-adm-none", train, 403),
        ("aqt-adm-none", {}, 201),
    ]
    for i, (ns, ann, want) in enumerate(cases):
        status, body = try_create(plane, ns, f"p{i}", ann)
        assert status == want, (ns, ann, status, body)
        if want == 403:
            m = message(body)
            assert "aiqos-workload-classes" in m and f"is not allowed in namespace {ns}" in m, m
    status, body = try_create(plane, "aqt-adm-none", "p-msg", train)
    assert "allows: none" in message(body), body
    status, body = try_create(plane, "aqt-adm-inf", "p-msg", train)
    assert "allows: inference)" in message(body), body

    # the policy compiled cleanly against this API version
    vap = plane.admin.get("/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicies/aiqos-workload-classes")
    assert not (vap.get("status", {}).get("typeChecking") or {}).get("expressionWarnings"), vap.get("status")


def test_admission_policy_on_update(namespaces):
    plane = namespaces
    wait_for("the policy to be enforced",
             lambda: try_create(plane, "aqt-adm-none", "u-probe", {"ai.workload": "inference"})[0] == 403,
             timeout=60, interval=0.5)
    status, body = try_create(plane, "aqt-adm-inf", "u1", {}, dry_run=False)
    assert status == 201, body
    # claiming a class the namespace does not list: refused; one it lists: admitted
    status, body = patch_annotations(plane, "aqt-adm-inf", "u1", {"ai.workload": "training"})
    assert status == 403 and "is not allowed" in message(body), body
    status, body = patch_annotations(plane, "aqt-adm-inf", "u1", {"ai.workload": "inference"})
    assert status == 200, body
    # the namespace loses its label: the pod keeps its class and can still be patched
    status, body = plane.admin.request("PATCH", "/api/v1/namespaces/aqt-adm-inf",
                                       {"metadata": {"labels": {LABEL: None}}},
                                       content_type="application/merge-patch+json")
    assert status == 200, body
    deadline = time.monotonic() + 30
    while True:  # the namespace cache of the admission plugin follows the change
        status, body = patch_annotations(plane, "aqt-adm-inf", "u1", {"ai.workload": "training"})
        if status == 403 or time.monotonic() > deadline:
            break
        patch_annotations(plane, "aqt-adm-inf", "u1", {"ai.workload": "inference"})
        time.sleep(0.5)
    assert status == 403, body
    status, body = patch_annotations(plane, "aqt-adm-inf", "u1", {"note": "kept"})
    assert status == 200, body
    # dropping the claim is always allowed
    status, body = patch_annotations(plane, "aqt-adm-inf", "u1", {"ai.workload": None})
    assert status == 200, body
