#!/usr/bin/env python3
"""test/log-calls.py [ROOT] — the "unit: log-calls" suite of test/run.sh: every
log_msg() call site of the programs (agent/, cni/) read as source, one case
per rule, then "N passed, N failed":

- numbers are logged as numbers (LOG_FMT, shared/log.h): no value is a
  ternary choosing between words such as "known"/"unknown" or "some"/"none"
  in place of a count or a rate (issue 32: pods=known, speed_bps=known);
- one pod key convention: "pod" holds "namespace/name" (LOG_FMT("%s/%s",
  ...) or cni_pod_display()), never a bare name or namespace field, and no
  separate "namespace" key next to it;
- no generic msg: "event" says nothing ("pod tuned with fallbacks" does).

ALLOWED lists the call sites left as they are, each with its reason."""
import os
import re
import sys

ROOT = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
DIRS = ("agent", "cni")
VAGUE = {"known", "unknown", "some", "none", "many", "few", "several", "lots"}
# (file, msg): left alone on purpose
ALLOWED = set()


def calls(text):
    """(offset, argument list) of every log_msg( ... ) call in C source text."""
    for m in re.finditer(r"\blog_msg\s*\(", text):
        i, depth, args, cur = m.end(), 1, [], []
        while i < len(text) and depth:
            c = text[i]
            if c == '"':
                j = i + 1
                while j < len(text) and text[j] != '"':
                    j += 2 if text[j] == "\\" else 1
                cur.append(text[i:j + 1])
                i = j + 1
                continue
            if c in "([{":
                depth += 1
            elif c in ")]}":
                depth -= 1
                if depth == 0:
                    break
            if c == "," and depth == 1:
                args.append("".join(cur).strip())
                cur = []
            else:
                cur.append(c)
            i += 1
        args.append("".join(cur).strip())
        yield m.start(), args


def literal(arg):
    m = re.fullmatch(r'"((?:[^"\\]|\\.)*)"', arg)
    return m.group(1) if m else None


def check(path, text):
    """The problems of one file: [(line, msg, problem)]."""
    out = []
    rel = os.path.relpath(path, ROOT)
    for off, args in calls(text):
        line = text.count("\n", 0, off) + 1
        if len(args) < 2:
            continue
        msg = literal(args[1]) or args[1]
        if (rel, msg) in ALLOWED:
            continue
        if msg == "event":
            out.append((line, msg, 'msg "event" is generic: say what happened'))
        kv = args[2:]
        keys = [literal(k) for k in kv[0::2]]
        for k, v in zip(kv[0::2], kv[1::2]):
            key = literal(k)
            words = re.findall(r'\?\s*"(\w+)"\s*:\s*"(\w+)"', v)
            for a, b in words:
                if a in VAGUE or b in VAGUE:
                    out.append((line, msg, "%s=%s: a number replaced by a word (log it with LOG_FMT)" % (key, v)))
            if key == "pod":
                bare = re.fullmatch(r"[\w.>\-\[\]]*(->|\.)(name|pod_name|namespace_|pod|ns)", v)
                if bare:
                    out.append((line, msg, "pod=%s: pod holds namespace/name (LOG_FMT(\"%%s/%%s\", ns, name))" % v))
        if "pod" in keys and "namespace" in keys:
            out.append((line, msg, "pod and namespace keys: pod holds namespace/name"))
    return out


def main():
    files = []
    for d in DIRS:
        for dirpath, _, names in os.walk(os.path.join(ROOT, d)):
            files += [os.path.join(dirpath, n) for n in names if n.endswith(".c")]
    if not files:
        print("no C files under %s" % ROOT)
        print("0 passed, 1 failed")
        return 1
    passed = failed = n_calls = 0
    for path in sorted(files):
        with open(path, encoding="utf-8") as f:
            text = f.read()
        n_calls += sum(1 for _ in calls(text))
        problems = check(path, text)
        if problems:
            failed += 1
            for line, msg, why in problems:
                print("FAIL %s:%d: msg=%r: %s" % (os.path.relpath(path, ROOT), line, msg, why))
        else:
            passed += 1
    # the rules themselves: each finds what it is for
    probe = ('log_msg(LOG_LVL_INFO, "ready", "pods", n ? "known" : "none", NULL);\n'
             'log_msg(LOG_LVL_INFO, "event", "pod", p->namespace_, "name", p->name, NULL);\n'
             'log_msg(LOG_LVL_INFO, "x", "pod", it->key.pod, "namespace", it->key.ns, NULL);\n')
    got = check(os.path.join(ROOT, "probe.c"), probe)
    if len(got) == 5:
        passed += 1
    else:
        failed += 1
        print("FAIL the rules on known-bad lines: %d problems found, want 5: %r" % (len(got), got))
    if n_calls < 50:
        failed += 1
        print("FAIL only %d log_msg calls found: the parser missed them" % n_calls)
    print("%d passed, %d failed" % (passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
