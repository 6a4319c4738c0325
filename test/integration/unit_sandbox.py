#!/usr/bin/python3
"""unit_sandbox.py [--without SYSCALL]... UNIT -- ARGV... — run ARGV under the
syscall filter and capability bounding set of a systemd unit file (its
SystemCallFilter=, SystemCallErrorNumber=, CapabilityBoundingSet= lines),
as systemd would apply them, without systemd as PID 1: the groups are
expanded by systemd's own `systemd-analyze syscall-filter`, the filter is
installed with libseccomp (python3-seccomp). --without drops a syscall
from the allow list (the unit as it was before it allowed that call)."""
import ctypes
import errno
import os
import re
import subprocess
import sys

import seccomp

PR_CAPBSET_DROP = 24
CAPS = {"CAP_NET_ADMIN": 12, "CAP_SYS_ADMIN": 21}


def unit_values(path, key):
    vals = []
    with open(path) as f:
        for line in f:
            m = re.match(r"^\s*%s=(.*)$" % re.escape(key), line)
            if m:
                vals.extend(m.group(1).split())
    return vals


def expand(names, seen=None):
    seen = set() if seen is None else seen
    out = set()
    for n in names:
        if not n.startswith("@"):
            out.add(n)
            continue
        if n in seen:
            continue
        seen.add(n)
        text = subprocess.run(["systemd-analyze", "syscall-filter", n], capture_output=True, text=True,
                              check=True).stdout
        members = [l.strip() for l in text.splitlines()[1:] if l.strip() and not l.strip().startswith("#")]
        out |= expand(members, seen)
    return out


def main():
    args = sys.argv[1:]
    without = set()
    while args and args[0] == "--without":
        without.add(args[1])
        args = args[2:]
    unit, argv = args[0], args[args.index("--") + 1:]
    allowed = expand(unit_values(unit, "SystemCallFilter")) - without
    assert not any(a.startswith("~") for a in allowed), "deny-list filters are not modelled"
    err = unit_values(unit, "SystemCallErrorNumber")
    action = seccomp.ERRNO(getattr(errno, err[0]) if err else errno.EPERM)
    caps = unit_values(unit, "CapabilityBoundingSet")
    libc = ctypes.CDLL(None, use_errno=True)
    keep = {CAPS[c] for c in caps}
    last = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last + 1):
        if cap not in keep and libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "PR_CAPBSET_DROP %d" % cap)
    f = seccomp.SyscallFilter(defaction=action)
    for name in sorted(allowed):
        try:
            f.add_rule(seccomp.ALLOW, name)
        except (RuntimeError, ValueError):
            pass  # a name this architecture or libseccomp does not know
    f.load()
    os.execvp(argv[0], argv)


if __name__ == "__main__":
    main()
