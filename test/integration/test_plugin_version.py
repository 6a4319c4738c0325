"""VERSION and STATUS verbs of the aiqos plugin (CNI 1.1.0)."""

import os
import subprocess

import cni


def test_version_lists_supported_versions(plugin):
    r = cni.run_plugin(plugin, "VERSION", {"cniVersion": "1.1.0"}).assert_ok()
    supported = r.json.get("supportedVersions")
    assert isinstance(supported, list), r.describe()
    for v in cni.ALL_VERSIONS:
        assert v in supported, f"{v} not in supportedVersions{r.describe()}"
    assert r.json.get("cniVersion") == "1.1.0", r.describe()


def test_run_by_hand_prints_an_about_line(plugin):
    # no CNI_COMMAND at all: what this is, on stderr (as the reference
    # plugins' skel does), not a CNI error document; rc 0
    env = {k: v for k, v in os.environ.items() if not k.startswith("CNI_")}
    p = subprocess.run([plugin], env=env, capture_output=True, text=True, timeout=10, stdin=subprocess.DEVNULL)
    assert p.returncode == 0 and p.stdout == "", (p.returncode, p.stdout, p.stderr)
    assert p.stderr.startswith("aiqos CNI plugin ") and "1.1.0" in p.stderr, p.stderr
    # an empty CNI_COMMAND is still the runtime's error
    p = subprocess.run([plugin], env=dict(env, CNI_COMMAND=""), capture_output=True, text=True, timeout=10,
                       stdin=subprocess.DEVNULL)
    assert p.returncode != 0 and '"code":4' in p.stdout.replace(" ", ""), (p.returncode, p.stdout)


def test_version_with_old_stdin_version(plugin):
    # A 0.3.1 runtime asks too; the answer must still be a version object.
    r = cni.run_plugin(plugin, "VERSION", {"cniVersion": "0.3.1"}).assert_ok()
    assert "0.3.1" in r.json.get("supportedVersions", []), r.describe()


def _status_conf(lab, **extra):
    c = cni.build_plugin_config(lab.aiqos_conf(**extra), "aqt-status", "1.1.0")
    return c


def test_status_ok_without_agent_when_not_required(lab):
    r = cni.run_plugin(lab.plugin, "STATUS", _status_conf(lab), log_file=lab.log_file)
    r.assert_ok(output=False)
    assert r.stdout.strip() == "", f"STATUS success must print nothing{r.describe()}"


def test_status_agent_required_but_absent_is_error_50(lab):
    assert not os.path.exists(lab.agent_socket)
    r = cni.run_plugin(lab.plugin, "STATUS", _status_conf(lab, agentRequired=True), log_file=lab.log_file)
    r.assert_error(50)


def test_status_agent_required_and_answering(lab):
    agent = lab.fake_agent(mode="answer")
    r = cni.run_plugin(lab.plugin, "STATUS", _status_conf(lab, agentRequired=True), log_file=lab.log_file)
    r.assert_ok(output=False)
    assert agent.requests, "the plugin did not ask the agent for STATUS"


def test_status_agent_required_but_hanging_is_bounded(lab):
    agent = lab.fake_agent(mode="hang")
    r = cni.run_plugin(lab.plugin, "STATUS", _status_conf(lab, agentRequired=True), log_file=lab.log_file)
    r.assert_error(50)
    assert agent.connections >= 1, "the plugin did not try the agent"
    assert r.elapsed_s < 1.0, f"STATUS took {r.elapsed_s:.2f}s with a hanging agent{r.describe()}"


def _needed(binary):
    out = subprocess.run(["readelf", "-d", binary], capture_output=True, text=True, check=True).stdout
    return sorted(line.split("[", 1)[1].split("]", 1)[0] for line in out.splitlines() if "(NEEDED)" in line)


def test_plugin_needs_nothing_but_libc(plugin):
    # The runtime exec's the plugin from the node's CNI bin directory; the
    # node need not have our build's libraries (kind's node image has no
    # libcjson1: every ADD and DEL failed with "error while loading shared
    # libraries"). libnl-3 and cJSON are linked in statically (Makefile).
    # (a sanitizer build, make SANITIZE=..., also needs its runtimes)
    needed = [n for n in _needed(plugin) if not n.startswith(("libasan.", "libubsan.", "libtsan.", "liblsan."))]
    assert needed == ["libc.so.6"], _needed(plugin)


def test_plugin_runs_with_the_hosts_libraries_hidden(plugin):
    # The same, observed: in a private mount namespace, every libcjson and
    # libnl shared object of this machine is covered by an empty file; the
    # plugin still answers VERSION. Without the static link this fails with
    # "error while loading shared libraries: libcjson.so.1".
    libs = sorted({os.path.realpath(os.path.join(d, f))
                   for d in ("/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu", "/usr/lib", "/lib")
                   if os.path.isdir(d)
                   for f in os.listdir(d) if f.startswith(("libcjson.so", "libnl-3.so", "libnl-route-3.so"))})
    assert any("libcjson.so" in p for p in libs), f"no libcjson on this machine to hide: {libs}"
    hide = "; ".join(f"mount --bind /dev/null {p}" for p in libs)
    script = f"{hide}; exec env CNI_COMMAND=VERSION {plugin}"
    p = subprocess.run(["unshare", "-m", "--propagation", "private", "sh", "-c", script],
                       input='{"cniVersion":"1.1.0"}', capture_output=True, text=True, timeout=20)
    assert p.returncode == 0 and '"supportedVersions"' in p.stdout, (p.returncode, p.stdout, p.stderr)
