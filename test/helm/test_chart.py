"""test/helm — the Helm chart manifests/helm/aiqos (suite "helm" of
test/run.sh), with helm built from its Go module (hack/build-helm.sh) and the
kubectl of hack/build-k8s.sh (its kustomize):
  - `helm lint --strict` with the defaults and with every toggle on;
  - the default rendering is the kustomize rendering of manifests/, object
    by object (the Namespace only with namespace.create, see values.yaml);
  - each value does what values.yaml says (image, node selection, metrics,
    config keys, chain mode, resources), invalid combinations fail;
  - every key of the agent config table (agent/config.c) is a value, and the
    rendered config.json is accepted by the agent's own parser (aiqosctl plan
    --config).
"""
import json
import os
import re
import subprocess

import pytest
import yaml

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("AIQOS_BUILD", os.path.join(TOP, "build"))
CHART = os.path.join(TOP, "manifests", "helm", "aiqos")
NS = "aiqos-system"


def bin_dir(script, *args):
    p = subprocess.run([os.path.join(TOP, "hack", script), "--print-bin-dir", *args], capture_output=True,
                       text=True, timeout=3600)
    assert p.returncode == 0, p.stderr
    return p.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="session")
def helm():
    return os.path.join(bin_dir("build-helm.sh"), "helm")


@pytest.fixture(scope="session")
def kubectl():
    return os.path.join(bin_dir("build-k8s.sh", "--check"), "kubectl")


def run(cmd, ok=True):
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if ok:
        assert p.returncode == 0, "%s: %s" % (" ".join(cmd), p.stderr)
    return p


def set_args(sets):
    args = []
    for s in sets:
        if ":=" in s:
            k, v = s.split(":=", 1)
            args += ["--set-json", "%s=%s" % (k, v)]
        else:
            args += ["--set", s]
    return args


def render(helm, *sets, ok=True):
    """helm template with --set for each "k=v" ("k:=JSON" with --set-json:
    --set makes 0.4 a string, as a values file would not)."""
    cmd = [helm, "template", "aiqos", CHART, "--namespace", NS] + set_args(sets)
    p = run(cmd, ok=ok)
    if not ok:
        return p
    return [d for d in yaml.safe_load_all(p.stdout) if d]


def by_key(objs):
    return {(o["kind"], o["metadata"].get("namespace", ""), o["metadata"]["name"]): o for o in objs}


def normalized(o):
    """The object with config.json parsed (the chart writes it with sorted
    keys, manifests/configmap.yaml in the documented order)."""
    o = json.loads(json.dumps(o))
    if o["kind"] == "ConfigMap" and "config.json" in o.get("data", {}):
        o["data"]["config.json"] = json.loads(o["data"]["config.json"])
    return o


def get(objs, kind, name=None):
    got = [o for o in objs if o["kind"] == kind and (name is None or o["metadata"]["name"] == name)]
    assert len(got) == 1, "%d %s %s" % (len(got), kind, name)
    return got[0]


def agent(objs):
    ds = get(objs, "DaemonSet", "aiqos-agent")
    return ds["spec"]["template"]["spec"], ds["spec"]["template"]["spec"]["containers"][0]


ALL_ON = ["metrics.prometheusRule.enabled=true", "metrics.grafanaDashboard.enabled=true",
          "metrics.service.enabled=true", "metrics.serviceMonitor.enabled=true", "metrics.podMonitor.enabled=true",
          "namespace.create=true", "admission.enabled=true", "config.trainingFloor:=0.2",
          "config.downlinkRate=500mbit", "config.downlink=true", "image.digest=sha256:" + "a" * 64,
          "controlPlane=true", "tolerations[0].key=nvidia.com/gpu", "tolerations[0].operator=Exists"]


def test_lint(helm):
    p = run([helm, "lint", "--strict", CHART])
    assert "1 chart(s) linted, 0 chart(s) failed" in p.stdout
    p = run([helm, "lint", "--strict", CHART] + set_args(ALL_ON))
    assert "0 chart(s) failed" in p.stdout


def not_hooks(objs):
    """The release's objects: Helm hooks (the uninstall cleanup) left out."""
    return [o for o in objs if "helm.sh/hook" not in (o["metadata"].get("annotations") or {})]


def test_uninstall_hooks_restore_the_nodes(helm, kubectl):
    """helm uninstall: pre-delete hooks stop the agent, run manifests/uninstall/'s
    DaemonSet (the same containers) and wait for it, in that order."""
    objs = render(helm)
    hooks = [o for o in objs if o not in not_hooks(objs)]
    assert all(o["metadata"]["annotations"]["helm.sh/hook"] == "pre-delete" for o in hooks)
    weight = {(o["kind"], o["metadata"]["name"]): int(o["metadata"]["annotations"]["helm.sh/hook-weight"])
              for o in hooks}
    stop, ds, wait = (("Job", "aiqos-uninstall-stop-agent"), ("DaemonSet", "aiqos-uninstall"),
                      ("Job", "aiqos-uninstall-wait"))
    assert weight[("ServiceAccount", "aiqos-uninstall")] < weight[stop] < weight[ds] < weight[wait]
    job = lambda name: get(objs, "Job", name)["spec"]["template"]["spec"]["containers"][0]["args"]
    assert job("aiqos-uninstall-stop-agent")[:3] == ["delete", "daemonset", "aiqos-agent"]
    assert job("aiqos-uninstall-wait")[:4] == ["rollout", "status", "daemonset", "aiqos-uninstall"]
    assert "--namespace=" + NS in job("aiqos-uninstall-wait")
    # the same node work as `kubectl apply -k manifests/uninstall/`
    kust = [d for d in yaml.safe_load_all(run([kubectl, "kustomize", os.path.join(TOP, "manifests", "uninstall")]
                                              ).stdout) if d]
    want = get(kust, "DaemonSet", "aiqos-uninstall")["spec"]["template"]["spec"]
    got = get(objs, "DaemonSet", "aiqos-uninstall")["spec"]["template"]["spec"]
    for part in ("initContainers", "containers"):
        for w, g in zip(want[part], got[part]):
            assert (w["command"], w["args"], w["volumeMounts"]) == (g["command"], g["args"], g["volumeMounts"])
            assert g["image"] == "aiqos:" + chart_app_version()
    assert [v["hostPath"]["path"] for v in want["volumes"]] == [v["hostPath"]["path"] for v in got["volumes"]]
    # the role lets the Jobs do exactly that
    rules = get(objs, "Role", "aiqos-uninstall")["rules"]
    assert {"delete", "watch"} <= set(next(r for r in rules if "daemonsets" in r["resources"])["verbs"])
    # `helm template --no-hooks | kubectl apply` (the e2e, values.yaml's
    # namespace.create) gets no hook: nothing that deletes the agent
    p = run([helm, "template", "aiqos", CHART, "--namespace", NS, "--no-hooks"])
    assert not [d for d in yaml.safe_load_all(p.stdout) if d and d["kind"] == "Job"]
    with open(os.path.join(TOP, "test", "e2e", "assert.py")) as f:
        e2e = f.read()
    assert '["install", RELEASE' in e2e and '["uninstall", RELEASE' in e2e, "the e2e runs helm install/uninstall"
    # the Jobs use the host's network: their pods never go through the CNI
    # chain being removed (and leave no cached config naming aiqos)
    for name in ("aiqos-uninstall-stop-agent", "aiqos-uninstall-wait"):
        assert get(objs, "Job", name)["spec"]["template"]["spec"]["hostNetwork"] is True
    # opt out: no hooks
    assert not [o for o in render(helm, "uninstall.cleanup=false") if o not in not_hooks(render(helm))]
    # the binary: auto (the default) reads the runtime's CNI cache, true and
    # false force; the main container never decides again
    for value, flags in (("auto", []), ("true", ["--remove-binary"]), ("false", ["--keep-binary"])):
        spec = get(render(helm, "uninstall.removeBinary=" + value), "DaemonSet", "aiqos-uninstall")
        spec = spec["spec"]["template"]["spec"]
        args = spec["initContainers"][0]["args"]
        assert [f for f in args if f.endswith("-binary")] == flags, (value, args)
        assert args[args.index("--cni-cache-dir") + 1] == "/host/var/lib/cni"
        assert "--keep-binary" in spec["containers"][0]["args"]
        cache = [v for v in spec["volumes"] if v["name"] == "cni-cache"]
        assert cache[0]["hostPath"]["path"] == "/var/lib/cni"
        assert {"name": "cni-cache", "mountPath": "/host/var/lib/cni", "readOnly": True} in \
            spec["initContainers"][0]["volumeMounts"]
    spec = get(render(helm, "cni.cacheDir=/run/cni-cache"), "DaemonSet", "aiqos-uninstall")["spec"]["template"]["spec"]
    assert [v["hostPath"]["path"] for v in spec["volumes"] if v["name"] == "cni-cache"] == ["/run/cni-cache"]
    assert get(render(helm), "DaemonSet", "aiqos-uninstall")["spec"]["template"]["spec"]["initContainers"][0][
        "args"] == want["initContainers"][0]["args"]


def chart_app_version():
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        return yaml.safe_load(f)["appVersion"]


def test_default_rendering_is_the_kustomize_rendering(helm, kubectl):
    kust = [d for d in yaml.safe_load_all(run([kubectl, "kustomize", os.path.join(TOP, "manifests")]).stdout) if d]
    want = {k: normalized(o) for k, o in by_key(kust).items()}
    got = {k: normalized(o) for k, o in by_key(not_hooks(render(helm))).items()}
    ns_key = ("Namespace", "", NS)
    assert ns_key in want, "manifests/ has no Namespace %s" % NS
    assert set(got) == set(want) - {ns_key}
    for k in got:
        assert got[k] == want[k], "%s differs from kustomize's" % (k,)
    with_ns = by_key(not_hooks(render(helm, "namespace.create=true")))
    assert normalized(with_ns[ns_key]) == want[ns_key]
    assert set(with_ns) == set(want)


def test_admission_policy_is_manifests_admission(helm, kubectl):
    assert not {o["kind"] for o in render(helm)} & {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    kust = [d for d in yaml.safe_load_all(run([kubectl, "kustomize", os.path.join(TOP, "manifests", "admission")]
                                              ).stdout) if d]
    assert {o["kind"] for o in kust} == {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
    got = {k: v for k, v in by_key(render(helm, "admission.enabled=true")).items()
           if k[0].startswith("ValidatingAdmissionPolicy")}
    assert got == by_key(kust)


def test_alerts_and_dashboard_are_manifests_monitoring(helm):
    mon = os.path.join(TOP, "manifests", "monitoring")
    assert not {o["kind"] for o in render(helm)} & {"PrometheusRule"}
    objs = render(helm, "metrics.prometheusRule.enabled=true", "metrics.prometheusRule.labels.release=kps",
                  "metrics.grafanaDashboard.enabled=true")
    with open(os.path.join(mon, "prometheusrule.yaml")) as f:
        want = yaml.safe_load(f)
    rule = get(objs, "PrometheusRule")
    assert rule["spec"] == want["spec"] and rule["metadata"]["namespace"] == NS
    assert rule["metadata"]["labels"]["release"] == "kps"
    assert set(want["metadata"]["labels"].items()) <= set(rule["metadata"]["labels"].items())
    cm = get(objs, "ConfigMap", "aiqos-grafana-dashboard")
    with open(os.path.join(mon, "grafana-dashboard.json")) as f:
        assert json.loads(cm["data"]["aiqos.json"]) == json.load(f)
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"


def test_every_agent_config_key_is_a_value():
    with open(os.path.join(TOP, "agent", "config.c")) as f:
        src = f.read()
    table = src[src.index("config_keys[] = {"):]
    table = table[:table.index("};")]
    keys = set(re.findall(r'\{"([A-Za-z]+)",\s*parse_', table))
    assert keys, "no keys found in agent/config.c's table"
    with open(os.path.join(CHART, "values.yaml")) as f:
        values = yaml.safe_load(f)["config"]
    assert keys <= set(values), "config keys missing from values.yaml: %s" % sorted(keys - set(values))
    assert set(values) <= keys, "values.config keys the agent does not know: %s" % sorted(set(values) - keys)


def rendered_config(objs):
    return json.loads(get(objs, "ConfigMap", "aiqos-config")["data"]["config.json"])


def test_config_values(helm, tmp_path):
    objs = render(helm, "config.uplinkRate=10gbit", "config.inferenceShare:=0.4", "config.classify=dscp",
                  "config.profiles.inference.targetUs=500")
    cfg = rendered_config(objs)
    assert cfg["uplinkRate"] == "10gbit" and cfg["inferenceShare"] == 0.4 and cfg["classify"] == "dscp"
    assert cfg["profiles"] == {"inference": {"targetUs": 500}}
    for k in ("trainingFloor", "downlinkRate", "downlink", "uplinkOverhead"):
        assert k not in cfg, "%s is null by default: left out" % k
    # The agent's own parser accepts what the chart renders.
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "pods.json").write_text('{"pods": []}')
    p = run([os.path.join(BUILD, "bin", "aiqosctl"), "plan", "--pods", str(tmp_path / "pods.json"), "--config",
             str(tmp_path / "config.json")], ok=False)
    assert p.returncode == 0, p.stderr
    # and refuses a wrong one: the check can fail
    bad = dict(cfg, classify="bogus")
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    p = run([os.path.join(BUILD, "bin", "aiqosctl"), "plan", "--pods", str(tmp_path / "pods.json"), "--config",
             str(tmp_path / "bad.json")], ok=False)
    assert p.returncode != 0 and "classify" in p.stderr


def test_schema_refuses_what_the_agent_would(helm):
    # --set makes 0.4 a string: the agent would refuse the file at runtime,
    # the schema refuses it at install time
    for bad in ("config.inferenceShare=0.4", "config.classify=bogus", "config.inferenceShare:=1.5",
                "cni.chainMode=sideways", "image.pullPolicy=Sometimes", "metrics.port:=70000",
                "image.digest=sha256:xyz", "uninstall.removeBinary=sometimes", "cni.cacheDir=var/lib/cni"):
        p = render(helm, bad, ok=False)
        assert p.returncode != 0 and "schema" in p.stderr, (bad, p.stderr)


def agent_refuses(tmp_path, cfg):
    """The agent's own parser on a config (aiqosctl plan --config): its error
    text, or None when it accepts it."""
    (tmp_path / "config.json").write_text(json.dumps(cfg))
    (tmp_path / "pods.json").write_text('{"pods": []}')
    p = run([os.path.join(BUILD, "bin", "aiqosctl"), "plan", "--pods", str(tmp_path / "pods.json"), "--config",
             str(tmp_path / "config.json")], ok=False)
    return p.stderr if p.returncode != 0 else None


def test_schema_refuses_unknown_key_and_bad_unit(helm, tmp_path):
    """What the agent refuses at start (it would crash-loop) the schema
    refuses at install: an unknown config key, a rate unit it does not know."""
    for bad, cfg, word in (("config.uplinkRat=10gbit", {"uplinkRat": "10gbit"}, "uplinkRat"),
                           ("config.uplinkRate=10G", {"uplinkRate": "10G"}, "uplinkRate"),
                           ("config.downlinkRate=1 gbit", {"downlinkRate": "1 gbit"}, "downlinkRate"),
                           ("config.uplinkrate=10gbit", {"uplinkrate": "10gbit"}, "uplinkrate")):
        p = render(helm, bad, ok=False)
        assert p.returncode != 0 and "schema" in p.stderr and word in p.stderr, (bad, p.stderr)
        err = agent_refuses(tmp_path, cfg)
        assert err and word in err, (cfg, err)


def rate_pattern_from_agent():
    """The schema's rate pattern as generated from the agent's unit table
    (agent/config.c agent_rate_parse_bps; units in any case)."""
    with open(os.path.join(TOP, "agent", "config.c")) as f:
        src = f.read()
    table = src[src.index("units[] = {"):]
    units = re.findall(r'\{"([a-z]+)",', table[:table.index("};")])
    assert len(units) >= 18, units
    ci = lambda u: "".join("[%s%s]" % (c, c.upper()) for c in u)
    alts = "|".join(ci(u) for u in sorted(units, key=lambda u: (-len(u), u)))
    return "^(|[0-9]+|([0-9]+[.]?[0-9]*|[.][0-9]+)(%s))$" % alts


def test_rate_schema_agrees_with_the_agent(helm, tmp_path):
    with open(os.path.join(CHART, "values.schema.json")) as f:
        cfg = json.load(f)["properties"]["config"]
    assert cfg.get("additionalProperties") is False
    for key in ("uplinkRate", "downlinkRate"):
        pats = [a.get("pattern") for a in cfg["properties"][key]["anyOf"] if a.get("type") == "string"]
        assert pats == [rate_pattern_from_agent()], (key, pats)
    # in the agent's range [1kbit, 1tbit], the schema and the agent agree
    for v in ("10gbit", "10GBit", "9500mbit", "1.5gbit", "2000000", "500mibps", ".5gbit", "",
              "10G", "10 gbit", "gbit", "10gbits", "1e9", "-5mbit", "1.5"):
        schema_ok = render(helm, "config.uplinkRate=" + v, ok=False).returncode == 0 if v else True
        agent_ok = agent_refuses(tmp_path, {"uplinkRate": v}) is None
        assert schema_ok == agent_ok, (v, schema_ok, agent_ok)


def test_chart_is_self_contained():
    """No symlinks in the chart (helm warns on each, and a packaged chart
    would differ from the tree); files/ are copies of manifests/admission and
    manifests/monitoring (make chart-files), byte for byte."""
    for dirpath, dirnames, files in os.walk(CHART):
        for n in dirnames + files:
            assert not os.path.islink(os.path.join(dirpath, n)), os.path.join(dirpath, n)
    for sub, names in (("admission", ("validatingadmissionpolicy.yaml", "validatingadmissionpolicybinding.yaml")),
                       ("monitoring", ("prometheusrule.yaml", "grafana-dashboard.json"))):
        for n in names:
            with open(os.path.join(TOP, "manifests", sub, n), "rb") as a, \
                    open(os.path.join(CHART, "files", sub, n), "rb") as b:
                assert a.read() == b.read(), "%s/%s differs from manifests/ (make chart-files)" % (sub, n)


def test_new_config_keys(helm):
    cfg = rendered_config(render(helm, "config.trainingFloor:=0.2", "config.downlinkRate=500mbit",
                                 "config.downlink=false"))
    assert cfg["trainingFloor"] == 0.2 and cfg["downlinkRate"] == "500mbit" and cfg["downlink"] is False


def test_image(helm):
    spec, c = agent(render(helm))
    with open(os.path.join(CHART, "Chart.yaml")) as f:
        app = yaml.safe_load(f)["appVersion"]
    assert c["image"] == "aiqos:" + app and spec["initContainers"][0]["image"] == c["image"]
    spec, c = agent(render(helm, "image.repository=registry.example.com/aiqos", "image.tag=v9",
                           "image.pullPolicy=Always"))
    assert c["image"] == "registry.example.com/aiqos:v9" and c["imagePullPolicy"] == "Always"
    assert spec["initContainers"][0]["image"] == c["image"]
    d = "sha256:" + "b" * 64
    spec, c = agent(render(helm, "image.tag=v9", "image.digest=" + d))  # a valid digest
    assert c["image"] == "aiqos@" + d
    spec, _ = agent(render(helm, "imagePullSecrets[0].name=regcred"))
    assert spec["imagePullSecrets"] == [{"name": "regcred"}]


def test_node_selection(helm):
    spec, _ = agent(render(helm))
    assert spec["tolerations"] == [{"operator": "Exists"}]
    spec, _ = agent(render(helm, "nodeSelector.nvidia\\.com/gpu\\.present=true", "tolerations[0].key=nvidia.com/gpu",
                           "tolerations[0].operator=Exists", "tolerations[0].effect=NoSchedule"))
    assert spec["nodeSelector"] == {"kubernetes.io/os": "linux", "nvidia.com/gpu.present": "true"}
    assert spec["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
    spec, _ = agent(render(helm, "tolerations[0].key=nvidia.com/gpu", "tolerations[0].operator=Exists",
                           "controlPlane=true"))
    assert {"key": "node-role.kubernetes.io/control-plane", "operator": "Exists",
            "effect": "NoSchedule"} in spec["tolerations"]
    assert len(spec["tolerations"]) == 2


def test_metrics_address(helm):
    spec, c = agent(render(helm))
    args = c["args"]
    assert args[args.index("--metrics-addr") + 1] == "$(POD_IP):9464"
    assert {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}} in c["env"]
    assert "host" not in c["readinessProbe"]["httpGet"] and "host" not in c["livenessProbe"]["httpGet"]
    spec, c = agent(render(helm, "metrics.bindAddress=127.0.0.1", "metrics.port=9999"))
    args = c["args"]
    assert args[args.index("--metrics-addr") + 1] == "127.0.0.1:9999"
    assert not any(e["name"] == "POD_IP" for e in c["env"])
    assert c["readinessProbe"]["httpGet"] == {"host": "127.0.0.1", "path": "/readyz", "port": 9999}
    assert c["ports"][0]["containerPort"] == 9999
    _, c = agent(render(helm, "metrics.bindAddress=::"))
    assert c["args"][c["args"].index("--metrics-addr") + 1] == "[::]:9464"


def test_metrics_objects(helm):
    kinds = {o["kind"] for o in render(helm)}
    assert not kinds & {"Service", "ServiceMonitor", "PodMonitor"}
    objs = render(helm, "metrics.service.enabled=true", "metrics.serviceMonitor.enabled=true",
                  "metrics.podMonitor.enabled=true", "metrics.podMonitor.labels.release=prom")
    svc = get(objs, "Service")
    ds = get(objs, "DaemonSet", "aiqos-agent")
    assert svc["spec"]["selector"] == ds["spec"]["selector"]["matchLabels"]
    assert svc["spec"]["ports"][0]["targetPort"] == "metrics" and svc["spec"]["clusterIP"] == "None"
    sm = get(objs, "ServiceMonitor")
    assert sm["spec"]["selector"]["matchLabels"] == svc["metadata"]["labels"] or \
        set(sm["spec"]["selector"]["matchLabels"].items()) <= set(svc["metadata"]["labels"].items())
    assert sm["spec"]["endpoints"][0]["port"] == "metrics"
    pm = get(objs, "PodMonitor")
    assert pm["metadata"]["labels"]["release"] == "prom"
    assert pm["spec"]["podMetricsEndpoints"][0]["port"] == ds["spec"]["template"]["spec"]["containers"][0][
        "ports"][0]["name"]
    # invalid combinations are refused at render time
    p = render(helm, "metrics.serviceMonitor.enabled=true", ok=False)
    assert p.returncode != 0 and "service.enabled" in p.stderr
    p = render(helm, "metrics.podMonitor.enabled=true", "metrics.bindAddress=127.0.0.1", ok=False)
    assert p.returncode != 0 and "node-local" in p.stderr


def test_chain_mode_and_flags(helm):
    spec, c = agent(render(helm, "cni.chainMode=dropin", "logLevel=debug"))
    assert "--dropin" in c["args"] and "--dropin" in spec["initContainers"][0]["args"]
    assert c["args"][c["args"].index("--log-level") + 1] == "debug"
    spec, c = agent(render(helm, "cni.chainMode=inPlace", "cni.confDir=/etc/cni/multus.d"))
    assert "--in-place" in c["args"]
    vols = {v["name"]: v for v in spec["volumes"]}
    assert vols["cni-conf"]["hostPath"]["path"] == "/etc/cni/multus.d"
    p = render(helm, "cni.chainMode=sideways", ok=False)
    assert p.returncode != 0 and "chainMode" in p.stderr  # the schema (and the template) refuse it


def test_resources(helm):
    spec, c = agent(render(helm, "resources.agent.limits.memory=128Mi", "resources.agent.requests.cpu=50m"))
    assert c["resources"]["limits"]["memory"] == "128Mi" and c["resources"]["requests"]["cpu"] == "50m"
    assert spec["initContainers"][0]["resources"]["limits"]["memory"] == "64Mi"
