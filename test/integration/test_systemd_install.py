"""test_systemd_install.py — the install commands in the header of
agent/aiqos-agent.service (and docs/install/systemd.md) work on a fresh host: run on
an empty root (every absolute destination moved below it), they leave the
programs, the unit and the kubeconfig in place with the documented modes.
The step that failed before (`install ... /etc/aiqos/kubeconfig` with no
/etc/aiqos) is among them."""
import os
import re
import shlex
import stat
import subprocess

REPO = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BUILD = os.path.abspath(os.environ.get("AIQOS_BUILD") or os.path.join(REPO, "build"))
UNIT = os.path.join(REPO, "agent", "aiqos-agent.service")


def install_lines():
    with open(UNIT) as f:
        lines = [l[1:].strip() for l in f if l.startswith("#   install ")]
    assert lines, "no install commands in the unit's header"
    return lines


def test_documented_in_docs():
    with open(os.path.join(REPO, "docs", "install", "systemd.md")) as f:
        doc = f.read()
    for l in install_lines():
        assert l in doc, "docs/install/systemd.md lacks the unit's step: " + l


def test_install_steps_on_an_empty_root(tmp_path):
    root = tmp_path / "root"
    # what a fresh host has (Debian: /usr/local/bin, /etc/systemd/system), and
    # not /etc/aiqos
    for d in ("usr/local/bin", "etc/systemd/system"):
        (root / d).mkdir(parents=True)
    (tmp_path / "aiqos-agent.kubeconfig").write_text("apiVersion: v1\nkind: Config\n")
    for line in install_lines():
        argv = shlex.split(line)
        # relative sources are the repo's (build/bin -> BUILD/bin), absolute
        # destinations go below the empty root
        out = []
        for a in argv:
            if a.startswith("/"):
                a = str(root) + a
            elif a.startswith("build/"):
                a = os.path.join(BUILD, a[len("build/"):])
            elif a.startswith("agent/"):
                a = os.path.join(REPO, a)
            out.append(a)
        p = subprocess.run(out, cwd=str(tmp_path), capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, "%s: %s" % (line, p.stderr)
    for prog in ("aiqos-agent", "aiqosctl", "aiqos"):
        assert os.access(str(root / "usr/local/bin" / prog), os.X_OK)
    assert (root / "etc/systemd/system/aiqos-agent.service").is_file()
    kc = root / "etc/aiqos/kubeconfig"
    assert stat.S_IMODE(kc.stat().st_mode) == 0o600
    assert re.match(r"^#", (root / "etc/systemd/system/aiqos-agent.service").read_text())
