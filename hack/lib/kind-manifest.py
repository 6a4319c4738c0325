#!/usr/bin/env python3
"""hack/lib/kind-manifest.py GO_FILE CONST_NAME

Prints the value of a Go string constant built from raw strings, quoted
strings and other constants of the same file joined by `+` — how kind keeps
its default CNI and storage manifests (pkg/build/nodeimage/const_*.go), which
`kind build node-image` writes to /kind/manifests/ of the node image. Exits 1
naming the constant when it is missing or not of that form.
"""
import re
import sys


def consts(src):
    """name -> value of every `const NAME = "..."` (one quoted string) in src."""
    return {m.group(1): bytes(m.group(2), "utf-8").decode("unicode_escape")
            for m in re.finditer(r'^\s*(?:const\s+)?(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"\s*$', src, re.M)}


def value(src, name):
    m = re.search(r"^const\s+%s\s*=\s*" % re.escape(name), src, re.M)
    if not m:
        raise ValueError("no constant %s" % name)
    known, pos, parts = consts(src), m.end(), []
    while True:
        pos = len(src) - len(src[pos:].lstrip())
        if src.startswith("`", pos):
            end = src.index("`", pos + 1)
            parts.append(src[pos + 1:end])
            pos = end + 1
        elif src.startswith('"', pos):
            q = re.match(r'"((?:[^"\\]|\\.)*)"', src[pos:])
            parts.append(bytes(q.group(1), "utf-8").decode("unicode_escape"))
            pos += q.end()
        else:
            ident = re.match(r"\w+", src[pos:])
            if not ident or ident.group(0) not in known:
                raise ValueError("constant %s: cannot evaluate %r" % (name, src[pos:pos + 40]))
            parts.append(known[ident.group(0)])
            pos += ident.end()
        rest = src[pos:]
        stripped = rest.lstrip(" \t")
        if stripped.startswith("+"):
            pos = len(src) - len(stripped) + 1
            continue
        return "".join(parts)


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: kind-manifest.py GO_FILE CONST_NAME")
    with open(sys.argv[1]) as f:
        src = f.read()
    try:
        sys.stdout.write(value(src, sys.argv[2]))
    except ValueError as e:
        sys.exit("kind-manifest: %s: %s" % (sys.argv[1], e))


if __name__ == "__main__":
    main()
