#!/usr/bin/python3
"""fakeapi: a fault-injecting fake Kubernetes API server for aiqos tests.

Serves the part of the Kubernetes API the aiqos node agent uses (pod LIST and
WATCH by node, GET pod, Event create/list/patch in core/v1 and events.k8s.io/v1)
over TLS with bearer-token or client-certificate auth. A plain-HTTP control API
on a second loopback port drives pods, compaction, tokens and faults, and
reports request statistics. Standard library only; README.md lists the control
API. Run: fakeapi.py --certs DIR [--client-ca DIR/ca.crt] --token-file F.
"""

import argparse
import base64
import bisect
import collections
import copy
import datetime
import http.server
import json
import os
import re
import select
import signal
import socket
import ssl
import struct
import sys
import tempfile
import threading
import time
import traceback
import urllib.parse
import uuid

# ---------------------------------------------------------------- constants

FAKE_EPOCH = datetime.datetime(2025, 1, 1, tzinfo=datetime.timezone.utc)
UID_NAMESPACE = uuid.UUID("6f1f6a4e-3c2b-4f0e-9a65-5f2a1e0c7d11")
BOOKMARK_ANNOTATION = "k8s.io/initial-events-end"
MAX_RECORDS = 10000  # request records kept for GET /stats (counters are total)
MAX_WATCH_BATCH = 1000  # log entries handed to one watcher per wake-up
MAX_TOKEN_FILE_BYTES = 64 * 1024
IDLE_TIMEOUT_S = 30.0  # keep-alive idle time and socket write timeout
HANDSHAKE_TIMEOUT_S = 10.0
TOO_LARGE_RV_WAIT_S = 3.0  # like the watch cache before answering 504
CONTROL_MAX_BODY = 64 * 1024 * 1024

DEFAULT_CONFIG = {
    "bookmark_interval": 2.0,  # seconds between periodic BOOKMARKs; 0 = only on demand
    "bookmark_annotation": True,  # put k8s.io/initial-events-end on periodic bookmarks
    "max_watch_seconds": 0.0,  # server-side cap on a watch's life; 0 = none
    "max_log": 10000,  # watch event log length; older entries are compacted away
    "max_events": 10000,  # stored Event objects; oldest are evicted
    "max_body_bytes": 3 * 1024 * 1024,  # request body limit on the API port (413 above)
}

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "AlreadyExists",
    410: "Expired",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
    500: "InternalError",
    503: "ServiceUnavailable",
    504: "Timeout",
}

POD_FIELDS = {
    "metadata.name",
    "metadata.namespace",
    "spec.nodeName",
    "spec.restartPolicy",
    "spec.schedulerName",
    "spec.serviceAccountName",
    "spec.hostNetwork",
    "status.phase",
    "status.podIP",
    "status.nominatedNodeName",
}

COMPACT_POD_KEYS = {
    "namespace",
    "name",
    "node",
    "annotations",
    "labels",
    "podIP",
    "podIPs",
    "uid",
    "phase",
    "hostIP",
    "hostNetwork",
}

API_KINDS = {
    "list",
    "watch",
    "get",
    "event_create",
    "event_list",
    "event_get",
    "event_patch",
}

DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_SUBDOMAIN_RE = re.compile(r"^%s(\.%s)*$" % (DNS1123_LABEL, DNS1123_LABEL))
QUALIFIED_NAME_RE = re.compile(
    r"^(%s(\.%s)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$" % (DNS1123_LABEL, DNS1123_LABEL)
)


def fake_time(rv):
    """Deterministic timestamp for an object written at resourceVersion rv."""
    t = FAKE_EPOCH + datetime.timedelta(seconds=rv)
    return t.strftime("%Y-%m-%dT%H:%M:%SZ")


def dumps(obj):
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


def status_object(code, message, reason=None, details=None):
    st = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason or REASONS.get(code, "Unknown"),
        "code": code,
    }
    if details:
        st["details"] = details
    return st


class ApiError(Exception):
    """An HTTP error answered with a Kubernetes Status object."""

    def __init__(self, code, message, reason=None, details=None, retry_after=None, close=False):
        super().__init__(message)
        self.code = code
        self.message = message
        self.reason = reason
        self.details = details
        self.retry_after = retry_after
        self.close = close

    def status(self):
        return status_object(self.code, self.message, self.reason, self.details)


class StreamAborted(Exception):
    """The connection was cut on purpose; nothing more may be written."""


class Conflict(Exception):
    """The object already exists (control API: 409)."""


class Missing(Exception):
    """No such object (control API: 404)."""


def get_path(obj, dotted):
    """Value at a dotted path of a JSON object rendered as a selector string."""
    cur = obj
    for part in dotted.split("."):
        if not isinstance(cur, dict) or part not in cur:
            return ""
        cur = cur[part]
    if cur is None:
        return ""
    if isinstance(cur, bool):
        return "true" if cur else "false"
    if isinstance(cur, (dict, list)):
        return dumps(cur).decode()
    return str(cur)


def parse_field_selector(expr, allowed):
    """'a=b,c!=d' -> [(key, op, value)]. allowed=None accepts any key."""
    terms = []
    for part in (expr or "").split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([^=!]+?)\s*(==|=|!=)\s*(.*)$", part)
        if not m:
            raise ApiError(400, "invalid field selector: %r" % expr)
        key, op, val = m.group(1).strip(), m.group(2), m.group(3).strip()
        if allowed is not None and key not in allowed:
            raise ApiError(400, "field label not supported: %s" % key)
        terms.append((key, "!=" if op == "!=" else "=", val))
    return terms


def parse_label_selector(expr):
    """Equality-based label selector: k=v, k==v, k!=v, k, !k."""
    terms = []
    for part in (expr or "").split(","):
        part = part.strip()
        if not part:
            continue
        m = re.match(r"^([A-Za-z0-9_./-]+)\s*(==|=|!=)\s*([A-Za-z0-9_.-]*)$", part)
        if m:
            terms.append((m.group(1), "!=" if m.group(2) == "!=" else "=", m.group(3)))
        elif re.match(r"^![A-Za-z0-9_./-]+$", part):
            terms.append((part[1:], "absent", None))
        elif re.match(r"^[A-Za-z0-9_./-]+$", part):
            terms.append((part, "exists", None))
        else:
            raise ApiError(400, "unable to parse requirement: %r (only equality-based label selectors)" % part)
    return terms


def selector_matches(obj, fields, labels):
    for key, op, val in fields:
        if (get_path(obj, key) == val) != (op == "="):
            return False
    if labels:
        have = (obj.get("metadata") or {}).get("labels") or {}
        for key, op, val in labels:
            if op == "exists" and key not in have:
                return False
            if op == "absent" and key in have:
                return False
            if op == "=" and have.get(key) != val:
                return False
            if op == "!=" and have.get(key) == val:
                return False
    return True


def merge_patch(target, patch):
    """RFC 7386 JSON merge patch; returns a new object."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = copy.deepcopy(target) if isinstance(target, dict) else {}
    for k, v in patch.items():
        if v is None:
            out.pop(k, None)
        else:
            out[k] = merge_patch(out.get(k), v)
    return out


def check_string_map(value, what):
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError("%s must be an object of string to string, got %s" % (what, dumps(value).decode()[:200]))
    return dict(value)


# ---------------------------------------------------------------- pods


def pod_key(pod):
    md = pod["metadata"]
    return (md["namespace"], md["name"])


def pod_ips(value):
    if value is None:
        return None
    if not isinstance(value, list):
        raise ValueError("podIPs must be a list, got %s" % dumps(value).decode())
    out = []
    for ip in value:
        if isinstance(ip, dict) and isinstance(ip.get("ip"), str):
            out.append({"ip": ip["ip"]})
        elif isinstance(ip, str):
            out.append({"ip": ip})
        else:
            raise ValueError("podIPs entries must be strings or {\"ip\": ...}, got %s" % dumps(ip).decode())
    return out


def build_pod(body):
    """A full Pod object from either a full pod JSON or the compact form."""
    if not isinstance(body, dict):
        raise ValueError("pod must be a JSON object")
    if "metadata" in body:
        pod = copy.deepcopy(body)
        if pod.get("kind", "Pod") != "Pod":
            raise ValueError("kind must be Pod, got %r" % pod.get("kind"))
        pod["kind"] = "Pod"
        pod["apiVersion"] = "v1"
        md = pod["metadata"]
        if not isinstance(md, dict) or not isinstance(md.get("name"), str) or not md["name"]:
            raise ValueError("metadata.name is required")
        md["namespace"] = md.get("namespace") or "default"
        md.pop("resourceVersion", None)
        for field in ("annotations", "labels"):
            if field in md:
                md[field] = check_string_map(md[field], "metadata." + field)
        pod.setdefault("spec", {})
        pod.setdefault("status", {})
        return pod
    unknown = set(body) - COMPACT_POD_KEYS
    if unknown:
        raise ValueError(
            "unknown compact pod keys %s (allowed: %s)" % (sorted(unknown), ", ".join(sorted(COMPACT_POD_KEYS)))
        )
    name = body.get("name")
    if not isinstance(name, str) or not name:
        raise ValueError("name is required")
    ns = body.get("namespace") or "default"
    md = {"name": name, "namespace": ns}
    if body.get("uid"):
        md["uid"] = str(body["uid"])
    labels = check_string_map(body.get("labels"), "labels")
    annotations = check_string_map(body.get("annotations"), "annotations")
    if labels:
        md["labels"] = labels
    if annotations:
        md["annotations"] = annotations
    spec = {
        "containers": [{"name": "app", "image": "registry.k8s.io/pause:3.10"}],
        "restartPolicy": "Always",
        "schedulerName": "default-scheduler",
        "serviceAccountName": "default",
    }
    if body.get("node"):
        spec["nodeName"] = str(body["node"])
    if body.get("hostNetwork"):
        spec["hostNetwork"] = True
    status = {"phase": body.get("phase") or ("Running" if body.get("node") else "Pending")}
    if body.get("hostIP"):
        status["hostIP"] = str(body["hostIP"])
    ips = pod_ips(body.get("podIPs"))
    if body.get("podIP"):
        status["podIP"] = str(body["podIP"])
        if ips is None:
            ips = [{"ip": status["podIP"]}]
    elif ips:
        status["podIP"] = ips[0]["ip"]
    if ips:
        status["podIPs"] = ips
    return {"kind": "Pod", "apiVersion": "v1", "metadata": md, "spec": spec, "status": status}


def compact_patch(pod, patch):
    """Apply a compact patch ({"annotations": {k: v|null}, "node", ...}) to a pod copy."""
    unknown = set(patch) - (COMPACT_POD_KEYS - {"namespace", "name", "uid"})
    if unknown:
        raise ValueError("unknown patch keys %s" % sorted(unknown))
    pod = copy.deepcopy(pod)
    md, spec, status = pod["metadata"], pod.setdefault("spec", {}), pod.setdefault("status", {})
    for field in ("annotations", "labels"):
        if field in patch:
            change = patch[field]
            if not isinstance(change, dict):
                raise ValueError("%s must be an object" % field)
            cur = dict(md.get(field) or {})
            for k, v in change.items():
                if v is None:
                    cur.pop(k, None)
                elif isinstance(v, str):
                    cur[k] = v
                else:
                    raise ValueError("%s[%r] must be a string or null" % (field, k))
            if cur:
                md[field] = cur
            else:
                md.pop(field, None)
    if "node" in patch:
        if patch["node"]:
            spec["nodeName"] = str(patch["node"])
        else:
            spec.pop("nodeName", None)
    if "hostNetwork" in patch:
        if patch["hostNetwork"]:
            spec["hostNetwork"] = True
        else:
            spec.pop("hostNetwork", None)
    if "phase" in patch:
        status["phase"] = str(patch["phase"])
    if "hostIP" in patch:
        status["hostIP"] = str(patch["hostIP"])
    if "podIPs" in patch:
        ips = pod_ips(patch["podIPs"]) or []
        if ips:
            status["podIPs"] = ips
            status["podIP"] = ips[0]["ip"]
        else:
            status.pop("podIPs", None)
            status.pop("podIP", None)
    if "podIP" in patch:
        if patch["podIP"]:
            status["podIP"] = str(patch["podIP"])
            if "podIPs" not in patch:
                status["podIPs"] = [{"ip": status["podIP"]}]
        else:
            status.pop("podIP", None)
            status.pop("podIPs", None)
    return pod


# ---------------------------------------------------------------- events

# core/v1 Event field <-> events.k8s.io/v1 Event field (others share the name)
EVENT_FIELD_MAP = [
    ("involvedObject", "regarding"),
    ("message", "note"),
    ("source", "deprecatedSource"),
    ("firstTimestamp", "deprecatedFirstTimestamp"),
    ("lastTimestamp", "deprecatedLastTimestamp"),
    ("count", "deprecatedCount"),
    ("reportingComponent", "reportingController"),
]
EVENT_SHARED_FIELDS = ["metadata", "reason", "type", "action", "related", "reportingInstance", "eventTime", "series"]


def event_to_group(core, group):
    """Render a stored (core/v1 shaped) Event for the API group of a request."""
    if group == "v1":
        out = copy.deepcopy(core)
        out["kind"] = "Event"
        out["apiVersion"] = "v1"
        return out
    out = {"kind": "Event", "apiVersion": "events.k8s.io/v1"}
    for f in EVENT_SHARED_FIELDS:
        if f in core:
            out[f] = copy.deepcopy(core[f])
    for c, e in EVENT_FIELD_MAP:
        if c in core:
            out[e] = copy.deepcopy(core[c])
    return out


def event_from_group(obj, group):
    if group == "v1":
        out = copy.deepcopy(obj)
    else:
        out = {}
        for f in EVENT_SHARED_FIELDS:
            if f in obj:
                out[f] = copy.deepcopy(obj[f])
        for c, e in EVENT_FIELD_MAP:
            if e in obj:
                out[c] = copy.deepcopy(obj[e])
    out["kind"] = "Event"
    out["apiVersion"] = "v1"
    return out


def validate_event(ev, group):
    """Create-time validation modelled on Kubernetes' event validation rules."""
    errs = []
    ns = ev["metadata"].get("namespace", "")
    inv = ev.get("involvedObject") or {}
    inv_ns = inv.get("namespace") or ""
    if not ev.get("eventTime"):
        if not inv_ns:
            if ns not in ("", "default"):
                errs.append("involvedObject.namespace: Invalid value: %r: does not match event.namespace" % inv_ns)
        elif ns != inv_ns:
            errs.append("involvedObject.namespace: Invalid value: %r: does not match event.namespace" % inv_ns)
    else:
        if not inv_ns and ns not in ("default", "kube-system"):
            errs.append("involvedObject.namespace: Invalid value: %r: does not match event.namespace" % inv_ns)
        rc = ev.get("reportingComponent") or ""
        if not rc:
            errs.append("reportingController: Required value")
        elif not QUALIFIED_NAME_RE.match(rc) or len(rc.split("/")[-1]) > 63:
            errs.append("reportingController: Invalid value: %r: must be a qualified name" % rc)
        ri = ev.get("reportingInstance") or ""
        if not ri:
            errs.append("reportingInstance: Required value")
        elif len(ri) > 128:
            errs.append("reportingInstance: Invalid value: can have at most 128 characters")
        for field in ("action", "reason"):
            v = ev.get(field) or ""
            if not v:
                errs.append("%s: Required value" % field)
            elif len(v) > 128:
                errs.append("%s: Invalid value: can have at most 128 characters" % field)
        if len(ev.get("message") or "") > 1024:
            errs.append("message: Invalid value: can have at most 1024 characters")
    if not DNS1123_SUBDOMAIN_RE.match(ns) or len(ns) > 253:
        errs.append("namespace: Invalid value: %r: a lowercase RFC 1123 subdomain" % ns)
    if group != "v1":
        name = ev["metadata"].get("name", "")
        if not DNS1123_SUBDOMAIN_RE.match(name) or len(name) > 253:
            errs.append("metadata.name: Invalid value: %r: a lowercase RFC 1123 subdomain" % name)
        if not ev.get("eventTime"):
            errs.append("eventTime: Required value")
        if ev.get("type") not in ("Normal", "Warning"):
            errs.append("type: Invalid value: \"\": has invalid value: %s" % (ev.get("type") or ""))
        for field in ("firstTimestamp", "lastTimestamp"):
            if ev.get(field):
                errs.append("%s: Invalid value: \"\": needs to be unset" % field)
        if ev.get("count"):
            errs.append("count: Invalid value: \"\": needs to be unset")
        src = ev.get("source") or {}
        if src.get("component") or src.get("host"):
            errs.append("source: Invalid value: \"\": needs to be unset")
        series = ev.get("series")
        if series is not None:
            count = series.get("count") if isinstance(series, dict) else None
            if not isinstance(count, int) or isinstance(count, bool) or count < 2:
                errs.append("series.count: Invalid value: \"\": should be at least 2")
            if not isinstance(series, dict) or not series.get("lastObservedTime"):
                errs.append("series.lastObservedTime: Required value")
    return errs


# ---------------------------------------------------------------- faults

FAULT_TYPES = {"reset", "gone", "status", "slow", "garbage", "oversized", "hang", "drop_bookmarks"}
# request kinds each fault type can act on (stream faults need a body to act on)
FAULT_KINDS = {
    "reset": {"watch", "list"},
    "gone": API_KINDS,
    "status": API_KINDS,
    "slow": {"watch", "list"},
    "garbage": {"watch", "list"},
    "oversized": {"watch", "list"},
    "hang": API_KINDS,
    "drop_bookmarks": {"watch"},
}
MATCH_GROUPS = {
    "any": API_KINDS,
    "list": {"list"},
    "watch": {"watch"},
    "get": {"get"},
    "events": {"event_create", "event_list", "event_get", "event_patch"},
    "event_create": {"event_create"},
    "event_list": {"event_list"},
    "event_patch": {"event_patch"},
}


def _num(params, key, default, lo=None, hi=None, integer=False):
    v = params.get(key, default)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise ValueError("%s must be a number, got %s" % (key, dumps(v).decode()))
    if integer and int(v) != v:
        raise ValueError("%s must be an integer, got %s" % (key, v))
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError("%s=%s out of range [%s, %s]" % (key, v, lo, hi))
    return int(v) if integer else float(v)


def _choice(params, key, default, choices):
    v = params.get(key, default)
    if v not in choices:
        raise ValueError("%s must be one of %s, got %s" % (key, sorted(choices), dumps(v).decode()))
    return v


class Fault:
    """One injected fault: applies to the next `count` matching requests, or always."""

    def __init__(self, fid, spec):
        if not isinstance(spec, dict):
            raise ValueError("fault must be a JSON object")
        spec = dict(spec)
        ftype = str(spec.pop("type", "")).replace("-", "_")
        if ftype not in FAULT_TYPES:
            raise ValueError("unknown fault type %r (known: %s)" % (ftype, ", ".join(sorted(FAULT_TYPES))))
        self.id = fid
        self.type = ftype
        count = spec.pop("count", 1)
        if count == "always":
            self.count = None
        elif isinstance(count, int) and not isinstance(count, bool) and count >= 1:
            self.count = count
        else:
            raise ValueError('count must be a positive integer or "always", got %s' % dumps(count).decode())
        p = {}
        if ftype == "reset":
            p["after_events"] = _num(spec, "after_events", 0, 0, None, True)
            p["how"] = _choice(spec, "how", "fin", {"fin", "rst"})
            p["in_chunk"] = bool(spec.get("in_chunk", False))
        elif ftype == "gone":
            p["mode"] = _choice(spec, "mode", "http", {"http", "event"})
            p["after_events"] = _num(spec, "after_events", 0, 0, None, True)
            p["message"] = spec.get("message")
        elif ftype == "status":
            p["code"] = _num(spec, "code", 503, 400, 599, True)
            p["retry_after"] = _num(spec, "retry_after", 1, 0, 86400, True)
            p["reason"] = spec.get("reason")
            p["message"] = spec.get("message")
        elif ftype == "slow":
            mode = _choice(spec, "mode", "bytes", {"bytes", "split", "coalesce", "pattern"})
            p["mode"] = mode
            p["delay_ms"] = _num(spec, "delay_ms", 5 if mode == "bytes" else 0, 0, 10000)
            p["pieces"] = _num(spec, "pieces", 3, 2, 1 << 20, True)
            p["events"] = _num(spec, "events", 0, 0, None, True)
            p["batch_ms"] = _num(spec, "batch_ms", 0, 0, 60000)
            sizes = spec.get("chunk_sizes", [7, 1, 300])
            if not isinstance(sizes, list) or not sizes or not all(
                isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in sizes
            ):
                raise ValueError("chunk_sizes must be a non-empty list of positive integers")
            p["chunk_sizes"] = sizes
        elif ftype == "garbage":
            line = spec.get("line", "{not json")
            if not isinstance(line, str) or "\n" in line:
                raise ValueError("line must be a string without newline")
            p["line"] = line
            p["after_events"] = _num(spec, "after_events", 0, 0, None, True)
        elif ftype == "oversized":
            p["bytes"] = _num(spec, "bytes", 2 * 1024 * 1024, 1, 256 * 1024 * 1024, True)
            p["after_events"] = _num(spec, "after_events", 0, 0, None, True)
            p["event_type"] = _choice(spec, "event_type", "MODIFIED", {"ADDED", "MODIFIED", "DELETED"})
            p["name"] = str(spec.get("name", "oversized"))
            p["namespace"] = str(spec.get("namespace", "default"))
        elif ftype == "hang":
            p["stage"] = _choice(spec, "stage", "request", {"connect", "request", "headers"})
            p["seconds"] = _num(spec, "seconds", None, 0, None)
        for k in p:
            spec.pop(k, None)
        default_match = "any" if ftype in ("status", "hang") else "watch"
        self.match = _choice(spec, "match", default_match, set(MATCH_GROUPS))
        self.node = spec.pop("node", None)
        self.query_contains = spec.pop("query_contains", None)
        spec.pop("match", None)
        if spec:
            raise ValueError("unknown keys for fault %s: %s" % (ftype, sorted(spec)))
        if ftype == "gone" and p["mode"] == "event":
            kinds = {"watch"}
        else:
            kinds = FAULT_KINDS[ftype]
        self.kinds = MATCH_GROUPS[self.match] & kinds
        if not self.kinds:
            raise ValueError("fault %s (mode %s) cannot act on match=%s" % (ftype, p.get("mode"), self.match))
        self.params = p
        self.hits = 0
        self.released = threading.Event()

    @property
    def request_level(self):
        return self.type in ("status", "hang") or (self.type == "gone" and self.params["mode"] == "http")

    def matches(self, kind, node, raw_query):
        if kind not in self.kinds:
            return False
        if self.node is not None and node != self.node:
            return False
        if self.query_contains is not None and self.query_contains not in raw_query:
            return False
        return True

    def to_json(self):
        d = {"id": self.id, "type": self.type, "match": self.match, "count": "always" if self.count is None else self.count}
        d["hits"] = self.hits
        if self.node is not None:
            d["node"] = self.node
        if self.query_contains is not None:
            d["query_contains"] = self.query_contains
        d.update(self.params)
        return d


# ---------------------------------------------------------------- state


class LogEntry:
    __slots__ = ("rv", "type", "obj", "prev", "cache")

    def __init__(self, rv, etype, obj, prev):
        self.rv = rv
        self.type = etype
        self.obj = obj
        self.prev = prev
        self.cache = {}

    def line(self, etype):
        b = self.cache.get(etype)
        if b is None:
            b = dumps({"type": etype, "object": self.obj}) + b"\n"
            self.cache[etype] = b
        return b

    def left_line(self):
        """DELETED for a watcher whose selector the object stopped matching: like the
        real cacher, the previous content stamped with this event's resourceVersion."""
        b = self.cache.get("left")
        if b is None:
            obj = copy.deepcopy(self.prev)
            obj["metadata"]["resourceVersion"] = str(self.rv)
            b = dumps({"type": "DELETED", "object": obj}) + b"\n"
            self.cache["left"] = b
        return b


class WatchState:
    def __init__(self, wid, cursor, bookmarks, deadline, state):
        self.id = wid
        self.cursor = cursor
        self.bookmarks = bookmarks
        self.drop_bookmarks = False
        self.deadline = deadline
        self.last_bookmark = time.monotonic()
        self.bookmark_epoch = state.bookmark_epoch
        self.close_epoch = state.close_epoch


class State:
    """Everything the two servers share. Stored pods are never mutated in place."""

    def __init__(self, token_file, config=None, start_rv=1):
        self.lock = threading.RLock()
        self.cond = threading.Condition(self.lock)
        self.t0 = time.monotonic()
        self.rv = start_rv
        self.compacted_rv = start_rv
        self.pods = {}
        self.log = []
        self.log_rvs = []
        self.events = collections.OrderedDict()
        self.uid_seq = 0
        self.name_seq = 0
        self.faults = []
        self.all_faults = {}
        self.fault_seq = 0
        self.records = collections.deque(maxlen=MAX_RECORDS)
        self.counts = collections.Counter()
        self.req_seq = 0
        self.watches = {}
        self.watch_seq = 0
        self.bookmark_epoch = 0
        self.close_epoch = 0
        self.close_how = "end"
        self.closing = False
        self.closing_event = threading.Event()
        self.token_file = token_file
        self.token_seq = 0
        self.tls_errors = collections.deque(maxlen=20)
        self.config = dict(DEFAULT_CONFIG)
        if config:
            self.set_config(config)

    # -- time and ids

    def now(self):
        return round(time.monotonic() - self.t0, 4)

    def _bump(self):
        self.rv += 1
        return self.rv

    def _new_uid(self, ns, name):
        self.uid_seq += 1
        return str(uuid.uuid5(UID_NAMESPACE, "%s/%s/%d" % (ns, name, self.uid_seq)))

    # -- config

    def set_config(self, cfg):
        if not isinstance(cfg, dict):
            raise ValueError("config must be a JSON object")
        with self.lock:
            new = dict(self.config)
            for k, v in cfg.items():
                if k not in DEFAULT_CONFIG:
                    raise ValueError("unknown config key %r (known: %s)" % (k, ", ".join(sorted(DEFAULT_CONFIG))))
                if k == "bookmark_annotation":
                    if not isinstance(v, bool):
                        raise ValueError("bookmark_annotation must be true or false")
                    new[k] = v
                elif k in ("bookmark_interval", "max_watch_seconds"):
                    new[k] = _num(cfg, k, 0, 0, 86400)
                else:
                    new[k] = _num(cfg, k, 1, 1, None, True)
            self.config = new
            self._trim_log()
            self._trim_events()
            self.cond.notify_all()
            return dict(self.config)

    # -- pods and the event log

    def _append_log(self, rv, etype, obj, prev):
        self.log.append(LogEntry(rv, etype, obj, prev))
        self.log_rvs.append(rv)
        self._trim_log()
        self.cond.notify_all()

    def _trim_log(self):
        extra = len(self.log) - self.config["max_log"]
        if extra > 0:
            self.compacted_rv = max(self.compacted_rv, self.log[extra - 1].rv)
            del self.log[:extra]
            del self.log_rvs[:extra]

    def put_pod(self, body, mode):
        """mode: create (409 if present), update (404 if absent) or upsert."""
        pod = build_pod(body)
        key = pod_key(pod)
        with self.lock:
            if self.closing:
                raise ValueError("server is shutting down")
            old = self.pods.get(key)
            if mode == "create" and old is not None:
                raise Conflict('pod "%s/%s" already exists' % key)
            if mode == "update" and old is None:
                raise Missing('pod "%s/%s" not found' % key)
            md = pod["metadata"]
            if old is not None:
                md.setdefault("uid", old["metadata"]["uid"])
                md.setdefault("creationTimestamp", old["metadata"]["creationTimestamp"])
            else:
                md.setdefault("uid", self._new_uid(*key))
            rv = self._bump()
            md["resourceVersion"] = str(rv)
            md.setdefault("creationTimestamp", fake_time(rv))
            self.pods[key] = pod
            etype = "MODIFIED" if old is not None else "ADDED"
            self._append_log(rv, etype, pod, old)
            return etype, pod

    def patch_pod(self, ns, name, patch):
        if not isinstance(patch, dict):
            raise ValueError("patch must be a JSON object")
        with self.lock:
            old = self.pods.get((ns, name))
            if old is None:
                raise Missing('pod "%s/%s" not found' % (ns, name))
            if {"metadata", "spec", "status"} & set(patch):
                new = merge_patch(old, patch)
                new["metadata"]["name"], new["metadata"]["namespace"] = name, ns
                new["metadata"]["uid"] = old["metadata"]["uid"]
                for field in ("annotations", "labels"):
                    if field in new["metadata"]:
                        new["metadata"][field] = check_string_map(new["metadata"][field], "metadata." + field)
            else:
                new = compact_patch(old, patch)
            rv = self._bump()
            new["metadata"]["resourceVersion"] = str(rv)
            self.pods[(ns, name)] = new
            self._append_log(rv, "MODIFIED", new, old)
            return "MODIFIED", new

    def delete_pod(self, ns, name, graceful=False):
        with self.lock:
            old = self.pods.get((ns, name))
            if old is None:
                raise Missing('pod "%s/%s" not found' % (ns, name))
            out = []
            if graceful and not old["metadata"].get("deletionTimestamp"):
                term = copy.deepcopy(old)
                rv = self._bump()
                term["metadata"]["resourceVersion"] = str(rv)
                term["metadata"]["deletionTimestamp"] = fake_time(rv + 30)
                term["metadata"]["deletionGracePeriodSeconds"] = 30
                self.pods[(ns, name)] = term
                self._append_log(rv, "MODIFIED", term, old)
                out.append(("MODIFIED", term))
                old = term
            gone = copy.deepcopy(old)
            rv = self._bump()
            gone["metadata"]["resourceVersion"] = str(rv)
            del self.pods[(ns, name)]
            self._append_log(rv, "DELETED", gone, old)
            out.append(("DELETED", gone))
            return out

    def compact(self, rv=None):
        with self.lock:
            target = self.rv if rv is None else rv
            if target > self.rv:
                raise ValueError("cannot compact to %d: current resourceVersion is %d" % (target, self.rv))
            target = max(target, self.compacted_rv)
            k = bisect.bisect_right(self.log_rvs, target)
            del self.log[:k]
            del self.log_rvs[:k]
            self.compacted_rv = target
            self.cond.notify_all()
            return target

    def _pods_at(self, rv):
        """Pods as they were at rv (rebuilt from the log); 410 if compacted away."""
        if rv >= self.rv:
            return self.pods
        if rv < self.compacted_rv:
            raise ApiError(
                410,
                "The provided resourceVersion %d is too old: the oldest available is %d" % (rv, self.compacted_rv),
                "Expired",
            )
        snap = dict(self.pods)
        i = bisect.bisect_right(self.log_rvs, rv)
        for e in reversed(self.log[i:]):
            key = pod_key(e.obj)
            if e.prev is None:
                snap.pop(key, None)
            else:
                snap[key] = e.prev
        return snap

    def wait_for_rv(self, rv, timeout):
        """Block until the store reached rv (like the watch cache); False on timeout."""
        end = time.monotonic() + timeout
        with self.cond:
            while self.rv < rv and not self.closing:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self.cond.wait(min(left, 0.25))
            return self.rv >= rv

    def list_pods(self, fields, labels, ns, limit, cont, rv, exact):
        """(items, list_rv, continue token or None, remaining count or None)."""
        with self.lock:
            start = None
            if cont:
                try:
                    tok = json.loads(base64.urlsafe_b64decode(cont.encode() + b"=" * (-len(cont) % 4)))
                    list_rv, start = int(tok["rv"]), str(tok["start"])
                except (ValueError, KeyError, TypeError):
                    raise ApiError(400, "continue key is not valid: %r" % cont)
                if list_rv < self.compacted_rv:
                    raise ApiError(
                        410,
                        "The provided continue parameter is too old to display a consistent list result. "
                        "You can start a new list without the continue parameter, or use the continue token "
                        "in this response to retrieve the remainder of the results.",
                        "Expired",
                    )
                snap = self._pods_at(list_rv)
            elif exact and rv:
                if rv > self.rv:
                    raise ApiError(504, "Too large resource version: %d, current: %d" % (rv, self.rv), "Timeout",
                                   {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}]})
                list_rv = rv
                snap = self._pods_at(rv)
            else:
                list_rv = self.rv
                snap = self.pods
            keys = sorted(k for k, p in snap.items() if (ns is None or k[0] == ns) and selector_matches(p, fields, labels))
            if start is not None:
                keys = [k for k in keys if "%s/%s" % k > start]
            page, rest = (keys[:limit], keys[limit:]) if limit else (keys, [])
            items = [snap[k] for k in page]
            token = None
            if rest:
                raw = dumps({"v": "meta.k8s.io/v1", "rv": list_rv, "start": "%s/%s" % page[-1]})
                token = base64.urlsafe_b64encode(raw).decode().rstrip("=")
            return items, list_rv, token, (len(rest) if rest else None)

    def get_pod(self, ns, name):
        with self.lock:
            return self.pods.get((ns, name))

    def all_pods(self):
        with self.lock:
            return [self.pods[k] for k in sorted(self.pods)], self.rv

    # -- watches

    def register_watch(self, cursor, bookmarks, deadline, info):
        with self.lock:
            self.watch_seq += 1
            ws = WatchState(self.watch_seq, cursor, bookmarks, deadline, self)
            info = dict(info, id=ws.id, started=self.now())
            self.watches[ws.id] = info
            return ws

    def unregister_watch(self, ws):
        with self.lock:
            self.watches.pop(ws.id, None)

    def watch_wait(self, ws, max_wait=0.25):
        """Next thing a watch stream must do: (action, payload)."""
        with self.cond:
            for attempt in (0, 1):
                if self.closing:
                    return "shutdown", None
                if ws.cursor < self.compacted_rv:
                    return "expired", "too old resource version: %d (%d)" % (ws.cursor, self.compacted_rv)
                i = bisect.bisect_right(self.log_rvs, ws.cursor)
                if i < len(self.log):
                    entries = self.log[i : i + MAX_WATCH_BATCH]
                    ws.cursor = entries[-1].rv
                    if len(entries) < MAX_WATCH_BATCH:
                        ws.cursor = max(ws.cursor, self.rv)
                    self.watches.get(ws.id, {})["cursor"] = str(ws.cursor)
                    return "events", entries
                ws.cursor = max(ws.cursor, self.rv)
                if ws.close_epoch != self.close_epoch:  # after draining what is already in the log
                    return "closed", self.close_how
                now = time.monotonic()
                if ws.deadline is not None and now >= ws.deadline:
                    return "timeout", None
                wait = max_wait
                if ws.bookmarks:
                    if ws.bookmark_epoch != self.bookmark_epoch:
                        ws.bookmark_epoch = self.bookmark_epoch
                        if not ws.drop_bookmarks:
                            return "bookmark", ws.cursor
                    interval = self.config["bookmark_interval"]
                    if interval > 0 and not ws.drop_bookmarks:
                        due = ws.last_bookmark + interval
                        if now >= due:
                            return "bookmark", ws.cursor
                        wait = min(wait, due - now)
                if ws.deadline is not None:
                    wait = min(wait, ws.deadline - now)
                if attempt == 1:
                    return "idle", None
                self.cond.wait(max(wait, 0.001))
            return "idle", None

    def bookmark_now(self):
        with self.lock:
            self.bookmark_epoch += 1
            self.cond.notify_all()
            return len(self.watches)

    def close_watches(self, how):
        with self.lock:
            self.close_how = how
            self.close_epoch += 1
            self.cond.notify_all()
            return len(self.watches)

    # -- events

    def _trim_events(self):
        while len(self.events) > self.config["max_events"]:
            self.events.popitem(last=False)

    def create_event(self, ns, body, group):
        if not isinstance(body, dict):
            raise ApiError(400, "Event body must be a JSON object")
        want_api = "v1" if group == "v1" else "events.k8s.io/v1"
        if body.get("kind", "Event") != "Event" or body.get("apiVersion", want_api) != want_api:
            raise ApiError(
                400, "the API version in the data (%s) does not match the expected API version (%s)" % (body.get("apiVersion"), want_api)
            )
        ev = event_from_group(body, group)
        md = ev.get("metadata")
        if not isinstance(md, dict):
            md = ev["metadata"] = {}
        if md.get("namespace") and md["namespace"] != ns:
            raise ApiError(400, "the namespace of the provided object does not match the namespace sent on the request")
        md["namespace"] = ns
        with self.lock:
            if not md.get("name"):
                if not md.get("generateName"):
                    raise ApiError(
                        422,
                        "Event in version \"%s\" cannot be handled as a Event: metadata.name: Required value: "
                        "name or generateName is required" % want_api,
                        "Invalid",
                    )
                self.name_seq += 1
                md["name"] = "%s%05x" % (md["generateName"], self.name_seq)
            name = md["name"]
            if not isinstance(name, str) or "/" in name or "%" in name or name in (".", ".."):
                raise ApiError(422, "Event %r is invalid: metadata.name: Invalid value" % (name,), "Invalid")
            errs = validate_event(ev, group)
            if errs:
                raise ApiError(
                    422,
                    'Event.%s "%s" is invalid: %s' % ("" if group == "v1" else "events.k8s.io", name, "; ".join(errs)),
                    "Invalid",
                    {"name": name, "kind": "Event", "causes": [{"message": e} for e in errs]},
                )
            if (ns, name) in self.events:
                raise ApiError(
                    409,
                    'events%s "%s" already exists' % ("" if group == "v1" else ".events.k8s.io", name),
                    "AlreadyExists",
                    {"name": name, "kind": "events"},
                )
            rv = self._bump()
            md["uid"] = self._new_uid(ns, name)
            md["resourceVersion"] = str(rv)
            md["creationTimestamp"] = fake_time(rv)
            for k in ("deletionTimestamp", "generation"):
                md.pop(k, None)
            self.events[(ns, name)] = ev
            self._trim_events()
            return event_to_group(ev, group)

    def patch_event(self, ns, name, patch, group):
        if not isinstance(patch, dict):
            raise ApiError(400, "patch must be a JSON object")
        with self.lock:
            old = self.events.get((ns, name))
            if old is None:
                raise ApiError(404, 'events "%s" not found' % name, "NotFound", {"name": name, "kind": "events"})
            view = merge_patch(event_to_group(old, group), patch)
            new = event_from_group(view, group)
            md = new.setdefault("metadata", {})
            md.update({k: old["metadata"][k] for k in ("name", "namespace", "uid", "creationTimestamp")})
            errs = validate_event(new, "v1")
            if errs:
                raise ApiError(422, 'Event "%s" is invalid: %s' % (name, "; ".join(errs)), "Invalid")
            rv = self._bump()
            md["resourceVersion"] = str(rv)
            self.events[(ns, name)] = new
            return event_to_group(new, group)

    def list_events(self, ns, group, fields):
        with self.lock:
            items = []
            for (ens, _), ev in self.events.items():
                if ns is not None and ens != ns:
                    continue
                view = event_to_group(ev, group)
                if selector_matches(view, fields, None):
                    items.append(view)
            return items, self.rv

    def get_event(self, ns, name, group):
        with self.lock:
            ev = self.events.get((ns, name))
            return event_to_group(ev, group) if ev is not None else None

    def clear_events(self):
        with self.lock:
            n = len(self.events)
            self.events.clear()
            return n

    # -- tokens

    def read_tokens(self):
        """Valid tokens: each non-empty line of the token file, read on every request."""
        if not self.token_file:
            return []
        try:
            with open(self.token_file, "r", encoding="utf-8", errors="replace") as f:
                data = f.read(MAX_TOKEN_FILE_BYTES)
        except OSError:
            return []
        return [line.strip() for line in data.splitlines() if line.strip()]

    def write_tokens(self, tokens):
        if not isinstance(tokens, list) or not tokens or not all(isinstance(t, str) and t.strip() and "\n" not in t for t in tokens):
            raise ValueError("tokens must be a non-empty list of non-empty single-line strings")
        with self.lock:
            d = os.path.dirname(os.path.abspath(self.token_file))
            fd, tmp = tempfile.mkstemp(prefix=".token.", dir=d)
            try:
                with os.fdopen(fd, "w") as f:
                    f.write("\n".join(t.strip() for t in tokens) + "\n")
                os.chmod(tmp, 0o600)
                os.replace(tmp, self.token_file)
            except BaseException:
                try:
                    os.unlink(tmp)
                except OSError:
                    pass
                raise
            return self.read_tokens()

    def rotate_token(self, keep_old):
        with self.lock:
            self.token_seq += 1
            new = "rotated-token-%d" % self.token_seq
            tokens = [new] + (self.read_tokens() if keep_old else [])
            return new, self.write_tokens(tokens)

    # -- faults

    def add_fault(self, spec):
        with self.lock:
            self.fault_seq += 1
            f = Fault(self.fault_seq, spec)
            self.faults.append(f)
            self.all_faults[f.id] = f
            return f

    def _consume(self, f):
        f.hits += 1
        if f.count is not None:
            f.count -= 1
            if f.count == 0:
                self.faults.remove(f)

    def take_faults(self, kind, node, raw_query):
        """(request-level fault or None, {type: stream fault}) for one request, consuming them."""
        with self.lock:
            for f in self.faults:
                if f.request_level and not (f.type == "hang" and f.params["stage"] == "connect") and f.matches(kind, node, raw_query):
                    self._consume(f)
                    return f, {}
            stream = {}
            for f in list(self.faults):
                if not f.request_level and f.type not in stream and f.matches(kind, node, raw_query):
                    self._consume(f)
                    stream[f.type] = f
            return None, stream

    def take_connect_fault(self):
        with self.lock:
            for f in self.faults:
                if f.type == "hang" and f.params["stage"] == "connect":
                    self._consume(f)
                    return f
            return None

    def clear_faults(self, fid=None):
        with self.lock:
            if fid is None:
                gone = list(self.all_faults.values())
                self.faults = []
                self.all_faults = {}
            else:
                f = self.all_faults.pop(fid, None)
                if f is None:
                    return 0
                gone = [f]
                if f in self.faults:
                    self.faults.remove(f)
            for f in gone:
                f.released.set()
            self.cond.notify_all()
            return len(gone)

    def fault_list(self):
        with self.lock:
            return [f.to_json() for f in self.faults]

    # -- stats

    def new_record(self, kind, method, path, query, params, client):
        with self.lock:
            self.req_seq += 1
            self.counts[kind] += 1
            self.counts["total"] += 1
            rec = {
                "seq": self.req_seq,
                "t": self.now(),
                "kind": kind,
                "method": method,
                "path": path,
                "query": query,
                "params": params,
                "client": client,
                "auth": None,
                "user": None,
                "token": None,
                "status": None,
                "faults": [],
            }
            self.records.append(rec)
            return rec

    def update_record(self, rec, **kw):
        with self.lock:
            rec.update(kw)

    def count(self, what):
        with self.lock:
            self.counts[what] += 1

    def stats(self, since=0, kind=None):
        with self.lock:
            recs = [dict(r) for r in self.records if r["seq"] > since and (kind is None or r["kind"] == kind)]
            return {
                "counts": dict(self.counts),
                "active_watches": len(self.watches),
                "watches": [dict(w) for w in self.watches.values()],
                "resourceVersion": str(self.rv),
                "tls_errors": list(self.tls_errors),
                "requests": recs,
            }

    def reset_stats(self):
        with self.lock:
            self.records.clear()
            self.counts.clear()

    def summary(self):
        with self.lock:
            return {
                "resourceVersion": str(self.rv),
                "compactedResourceVersion": str(self.compacted_rv),
                "pods": len(self.pods),
                "log_entries": len(self.log),
                "events": len(self.events),
                "active_watches": len(self.watches),
                "watches": [dict(w) for w in self.watches.values()],
                "faults": [f.to_json() for f in self.faults],
                "config": dict(self.config),
                "token_file": self.token_file,
            }

    def begin_shutdown(self):
        with self.lock:
            self.closing = True
            self.closing_event.set()
            for f in self.all_faults.values():
                f.released.set()
            self.cond.notify_all()


# ---------------------------------------------------------------- stream writer


class StreamWriter:
    """Writes a chunked body, shaped by an optional 'slow' fault."""

    def __init__(self, handler, slow):
        self.h = handler
        self.slow = slow.params if slow else None
        self.pattern_i = 0

    def _raw(self, data):
        self.h.wfile.write(data)

    def _chunk(self, data):
        if data:  # an empty chunk would end the body
            self._raw(b"%x\r\n%s\r\n" % (len(data), data))

    def _pause(self, ms):
        if ms > 0 and not self.h.server.state.closing:
            time.sleep(ms / 1000.0)

    def write_items(self, items):
        """items: ("line", bytes) | ("abort", (bytes, how, in_chunk)) | ("end", None)."""
        group = []
        for kind, payload in items:
            if kind == "line":
                group.append(payload)
                continue
            self._write_lines(group)
            group = []
            if kind == "end":
                self._raw(b"0\r\n\r\n")
            elif kind == "abort":
                data, how, in_chunk = payload
                half = data[: len(data) // 2]
                if in_chunk:
                    self._raw(b"%x\r\n%s" % (len(data), half))
                else:
                    self._chunk(half)
                self.h.abort_connection(how)
                raise StreamAborted()
        self._write_lines(group)

    def _write_lines(self, lines):
        if not lines:
            return
        s = self.slow
        if s is None:  # one chunk per event, written with one call per batch
            self._raw(b"".join(b"%x\r\n%s\r\n" % (len(line), line) for line in lines if line))
            return
        mode, delay = s["mode"], s["delay_ms"]
        if mode == "bytes":
            for line in lines:
                for i in range(len(line)):
                    self._chunk(line[i : i + 1])
                    self._pause(delay)
        elif mode == "split":
            n = s["pieces"]
            for line in lines:
                cuts = [len(line) * i // n for i in range(n + 1)]
                for a, b in zip(cuts, cuts[1:]):
                    self._chunk(line[a:b])
                    self._pause(delay)
        elif mode == "coalesce":
            k = s["events"] or len(lines)
            for i in range(0, len(lines), k):
                self._chunk(b"".join(lines[i : i + k]))
                self._pause(delay)
        else:  # pattern: cut the byte stream with chunk_sizes, cycling, across event boundaries
            data = b"".join(lines)
            sizes = s["chunk_sizes"]
            pos = 0
            while pos < len(data):
                size = sizes[self.pattern_i % len(sizes)]
                self.pattern_i += 1
                self._chunk(data[pos : pos + size])
                pos += size
                self._pause(delay)


def bookmark_line(rv, annotate):
    md = {"resourceVersion": str(rv), "creationTimestamp": None}
    if annotate:
        md["annotations"] = {BOOKMARK_ANNOTATION: "true"}
    obj = {"kind": "Pod", "apiVersion": "v1", "metadata": md, "spec": {"containers": None}, "status": {}}
    return dumps({"type": "BOOKMARK", "object": obj}) + b"\n"


def error_line(code, reason, message):
    return dumps({"type": "ERROR", "object": status_object(code, message, reason)}) + b"\n"


# ---------------------------------------------------------------- API handler

EVENTS_CORE_RE = re.compile(r"^/api/v1/namespaces/([^/]+)/events(?:/([^/]+))?$")
EVENTS_NEW_RE = re.compile(r"^/apis/events\.k8s\.io/v1/namespaces/([^/]+)/events(?:/([^/]+))?$")
PODS_NS_RE = re.compile(r"^/api/v1/namespaces/([^/]+)/pods(?:/([^/]+))?$")


def truthy(v):
    return v in ("1", "true", "True")


def classify(method, path, params):
    if path in ("/version", "/healthz", "/readyz", "/livez"):
        return "public"
    if path == "/api/v1/pods" or (PODS_NS_RE.match(path) and not PODS_NS_RE.match(path).group(2)):
        return "watch" if truthy(params.get("watch")) else "list"
    if PODS_NS_RE.match(path):
        return "get"
    m = EVENTS_CORE_RE.match(path) or EVENTS_NEW_RE.match(path)
    if m or path in ("/api/v1/events", "/apis/events.k8s.io/v1/events"):
        named = bool(m and m.group(2))
        if method == "POST":
            return "event_create"
        if method == "PATCH":
            return "event_patch"
        return "event_get" if named else "event_list"
    return "other"


class ApiHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakeapi/1"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S

    def setup(self):
        super().setup()
        try:
            self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        except OSError:
            pass
        self.aborted = False

    def log_message(self, fmt, *args):
        self.server.log("%s %s" % (self.address_string(), fmt % args))

    def log_request(self, code="-", size="-"):
        pass  # one line per request is written by dispatch()

    # -- plumbing

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def read_body(self, limit):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts, total = [], 0
            while True:
                line = self.rfile.readline(1024)
                try:
                    size = int(line.split(b";")[0].strip(), 16)
                except ValueError:
                    raise ApiError(400, "malformed chunked request body", close=True)
                if size == 0:
                    while self.rfile.readline(1024) not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > limit:
                    raise ApiError(413, "the request body exceeds %d bytes" % limit, close=True)
                parts.append(self.rfile.read(size))
                self.rfile.readline(1024)
        try:
            n = int(self.headers.get("Content-Length") or 0)
        except ValueError:
            raise ApiError(400, "invalid Content-Length", close=True)
        if n > limit:
            raise ApiError(413, "the request body exceeds %d bytes" % limit, close=True)
        return self.rfile.read(n) if n > 0 else b""

    def send_json(self, code, obj, headers=None):
        body = dumps(obj)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        for k, v in (headers or {}).items():
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.status_sent = code
        self.server.state.update_record(self.rec, status=code)
        self.wfile.write(body)

    def send_error_status(self, e):
        headers = {}
        if e.retry_after is not None:
            headers["Retry-After"] = str(e.retry_after)
        if e.close:
            self.close_connection = True
            headers["Connection"] = "close"
        self.send_json(e.code, e.status(), headers)

    def start_chunked(self, code=200):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.status_sent = code
        self.server.state.update_record(self.rec, status=code)

    def abort_connection(self, how):
        """Cut the TCP connection without a TLS close_notify: FIN, or RST with how='rst'."""
        self.aborted = True
        self.close_connection = True
        sock = self.connection
        try:
            if how == "rst":
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            else:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)
        except OSError:
            pass
        try:
            socket.socket.close(sock)
        except OSError:
            pass

    def client_gone(self):
        """True if the peer closed its side (checked while a stream is idle)."""
        sock = self.connection
        try:
            r, _, _ = select.select([sock], [], [], 0)
        except (OSError, ValueError):
            return True
        if not r and not sock.pending():
            return False
        old = sock.gettimeout()
        try:
            sock.setblocking(False)
            data = sock.recv(1)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return False
        except (ssl.SSLError, OSError):
            return True
        finally:
            try:
                sock.settimeout(old)
            except OSError:
                pass
        return data == b""

    # -- dispatch

    def dispatch(self):
        state = self.server.state
        url = urllib.parse.urlsplit(self.path)
        path = url.path
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        kind = classify(self.command, path, params)
        self.status_sent = None
        self.rec = state.new_record(kind, self.command, path, url.query, params, "%s:%d" % self.client_address[:2])
        fault_names = []
        try:
            try:
                body = self.read_body(state.config["max_body_bytes"])
                if kind != "public":
                    self.authenticate(state)
                if kind in API_KINDS:
                    node = None
                    for key, op, val in parse_field_selector(params.get("fieldSelector"), None):
                        if key == "spec.nodeName" and op == "=":
                            node = val
                    req_fault, stream = state.take_faults(kind, node, url.query)
                    fault_names = ["%s#%d" % (f.type, f.id) for f in ([req_fault] if req_fault else []) + list(stream.values())]
                    state.update_record(self.rec, faults=fault_names)
                    if req_fault is not None:
                        self.apply_request_fault(req_fault, params)
                        return
                else:
                    stream = {}
                self.route(kind, path, params, body, stream)
            except ApiError as e:
                if self.status_sent is None and not self.aborted:
                    self.send_error_status(e)
                elif self.status_sent is not None:
                    self.close_connection = True
        except StreamAborted:
            pass
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout, OSError) as e:
            self.close_connection = True
            state.update_record(self.rec, error=type(e).__name__)
        except Exception as e:  # a bug: answer 500 so the client sees it, and log the trace
            self.server.log("internal error: %s" % traceback.format_exc())
            state.update_record(self.rec, error="%s: %s" % (type(e).__name__, e))
            self.close_connection = True
            if self.status_sent is None and not self.aborted:
                try:
                    self.send_error_status(ApiError(500, "internal error in fakeapi: %s" % e, close=True))
                except OSError:
                    pass
        finally:
            status = self.status_sent if self.status_sent is not None else ("aborted" if self.aborted else None)
            state.update_record(self.rec, status=status, duration=round(time.monotonic() - state.t0 - self.rec["t"], 4))
            self.server.log(
                "%s %s %s%s -> %s auth=%s%s%s"
                % (
                    self.client_address[0],
                    self.command,
                    path,
                    ("?" + url.query) if url.query else "",
                    status,
                    self.rec.get("auth"),
                    (" faults=" + ",".join(fault_names)) if fault_names else "",
                    (" end=" + self.rec["end"]) if self.rec.get("end") else "",
                )
            )

    def authenticate(self, state):
        cert = None
        try:
            cert = self.connection.getpeercert()
        except (ValueError, OSError):
            cert = None
        auth_hdr = self.headers.get("Authorization", "")
        token = None
        if auth_hdr[:7].lower() == "bearer ":
            token = auth_hdr[7:].strip()
        if cert:
            cn = None
            for rdn in cert.get("subject", ()):
                for k, v in rdn:
                    if k == "commonName":
                        cn = v
            state.update_record(self.rec, auth="cert", user=cn, token=token)
            return
        if token is not None and token in state.read_tokens():
            state.update_record(self.rec, auth="token", user="token", token=token)
            return
        state.update_record(self.rec, auth="invalid-token" if token is not None else "none", token=token)
        state.count("unauthorized")
        raise ApiError(401, "Unauthorized", "Unauthorized")

    def apply_request_fault(self, f, params):
        p = f.params
        if f.type == "status":
            code = p["code"]
            msg = p["message"] or {
                429: "Too many requests, please try again later.",
                500: "Internal error occurred: injected fault",
                503: "The server is currently unable to handle the request",
            }.get(code, "injected fault %d" % code)
            details = {"retryAfterSeconds": p["retry_after"]} if p["retry_after"] is not None else None
            raise ApiError(code, msg, p["reason"], details, retry_after=p["retry_after"])
        if f.type == "gone":
            rv = params.get("resourceVersion", "")
            msg = p["message"] or "too old resource version: %s (%d)" % (rv or "0", self.server.state.compacted_rv)
            raise ApiError(410, msg, "Expired")
        # hang
        if p["stage"] == "headers":
            self.start_chunked(200)
        self.hang(f)

    def hang(self, f):
        """Hold the connection without answering until released, timed out, or shutdown."""
        state = self.server.state
        end = None if f.params["seconds"] is None else time.monotonic() + f.params["seconds"]
        while not f.released.is_set() and not state.closing:
            if end is not None and time.monotonic() >= end:
                break
            if self.client_gone():
                state.update_record(self.rec, end="client-gone")
                self.close_connection = True
                return
            f.released.wait(0.1)
        state.update_record(self.rec, end="released")
        self.abort_connection("fin")
        raise StreamAborted()

    def route(self, kind, path, params, body, stream):
        m = PODS_NS_RE.match(path)
        if kind in ("list", "watch"):
            self.require_method("GET")
            ns = m.group(1) if m else None
            fields = parse_field_selector(params.get("fieldSelector"), POD_FIELDS)
            labels = parse_label_selector(params.get("labelSelector"))
            if kind == "watch":
                return self.serve_watch(ns, fields, labels, params, stream)
            return self.serve_list(ns, fields, labels, params, stream)
        if kind == "get":
            self.require_method("GET")
            pod = self.server.state.get_pod(m.group(1), m.group(2))
            if pod is None:
                raise ApiError(404, 'pods "%s" not found' % m.group(2), "NotFound", {"name": m.group(2), "kind": "pods"})
            return self.send_json(200, pod)
        if kind.startswith("event_"):
            return self.serve_events(kind, path, params, body)
        if kind == "public":
            self.require_method("GET")
            if path == "/version":
                return self.send_json(
                    200,
                    {"major": "1", "minor": "31", "gitVersion": "v1.31.0-fakeapi", "platform": "linux/amd64"},
                )
            body = b"ok"
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
            self.status_sent = 200
            return None
        raise ApiError(404, "the server could not find the requested resource", "NotFound")

    def require_method(self, *methods):
        if self.command not in methods:
            raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")

    # -- events

    def serve_events(self, kind, path, params, body):
        state = self.server.state
        m = EVENTS_CORE_RE.match(path)
        group = "v1"
        if not m:
            m = EVENTS_NEW_RE.match(path)
            group = "events.k8s.io/v1"
        if m is None:  # cluster-wide list
            self.require_method("GET")
            group = "v1" if path.startswith("/api/") else "events.k8s.io/v1"
            ns, name = None, None
        else:
            ns, name = m.group(1), m.group(2)
        if kind == "event_create":
            if name:
                raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
            try:
                obj = json.loads(body or b"null")
            except ValueError as e:
                raise ApiError(400, "invalid JSON in request body: %s" % e)
            return self.send_json(201, state.create_event(ns, obj, group))
        if kind == "event_patch":
            if not name:
                raise ApiError(405, "the server does not allow this method on the requested resource", "MethodNotAllowed")
            ctype = self.headers.get("Content-Type", "").split(";")[0].strip()
            if ctype not in ("application/merge-patch+json", "application/strategic-merge-patch+json"):
                raise ApiError(415, "the body of the request was in an unknown format - accepted media types include: "
                               "application/merge-patch+json, application/strategic-merge-patch+json", "UnsupportedMediaType")
            try:
                patch = json.loads(body or b"null")
            except ValueError as e:
                raise ApiError(400, "invalid JSON in request body: %s" % e)
            return self.send_json(200, state.patch_event(ns, name, patch, group))
        self.require_method("GET")
        if kind == "event_get":
            ev = state.get_event(ns, name, group)
            if ev is None:
                raise ApiError(404, 'events "%s" not found' % name, "NotFound", {"name": name, "kind": "events"})
            return self.send_json(200, ev)
        fields = parse_field_selector(params.get("fieldSelector"), None)
        items, rv = state.list_events(ns, group, fields)
        return self.send_json(200, {"kind": "EventList", "apiVersion": "v1" if group == "v1" else group, "metadata": {"resourceVersion": str(rv)}, "items": items})

    # -- list

    def serve_list(self, ns, fields, labels, params, stream):
        state = self.server.state
        limit = self.int_param(params, "limit", 0)
        rv = self.rv_param(params)
        exact = params.get("resourceVersionMatch") == "Exact"
        if rv and not exact and rv > state.rv:
            if not state.wait_for_rv(rv, TOO_LARGE_RV_WAIT_S):
                raise ApiError(
                    504,
                    "Too large resource version: %d, current: %d" % (rv, state.rv),
                    "Timeout",
                    {"causes": [{"reason": "ResourceVersionTooLarge", "message": "Too large resource version"}], "retryAfterSeconds": 1},
                    retry_after=1,
                )
        items, list_rv, token, remaining = state.list_pods(fields, labels, ns, limit, params.get("continue"), rv, exact)
        items = list(items)
        if "oversized" in stream:
            items.append(self.oversized_pod(stream["oversized"].params, self.node_of(fields)))
        md = {"resourceVersion": str(list_rv)}
        if token:
            md["continue"] = token
            md["remainingItemCount"] = remaining
        data = dumps({"kind": "PodList", "apiVersion": "v1", "metadata": md, "items": items})
        if "garbage" in stream:
            data = stream["garbage"].params["line"].encode() + b"\n"
        if "reset" not in stream and "slow" not in stream:
            body = data
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Cache-Control", "no-cache, private")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.status_sent = 200
            state.update_record(self.rec, status=200)
            self.wfile.write(body)
            return
        self.start_chunked(200)
        w = StreamWriter(self, stream.get("slow"))
        if "reset" in stream:
            rp = stream["reset"].params
            state.update_record(self.rec, end="reset")
            w.write_items([("abort", (data, rp["how"], rp["in_chunk"]))])
        w.write_items([("line", data), ("end", None)])

    @staticmethod
    def int_param(params, key, default):
        v = params.get(key)
        if v in (None, ""):
            return default
        try:
            n = int(v)
        except ValueError:
            raise ApiError(400, "invalid %s: %r" % (key, v))
        if n < 0:
            raise ApiError(400, "invalid %s: %r: must not be negative" % (key, v))
        return n

    @staticmethod
    def rv_param(params):
        v = params.get("resourceVersion", "")
        if v == "":
            return 0
        try:
            n = int(v)
        except ValueError:
            raise ApiError(400, "invalid resource version: %r" % v)
        if n < 0:
            raise ApiError(400, "invalid resource version: %r" % v)
        return n

    @staticmethod
    def node_of(fields):
        for key, op, val in fields:
            if key == "spec.nodeName" and op == "=":
                return val
        return None

    def oversized_pod(self, p, node):
        state = self.server.state
        base = state.get_pod(p["namespace"], p["name"])
        if base is not None:
            pod = copy.deepcopy(base)
        else:
            pod = build_pod({"namespace": p["namespace"], "name": p["name"], "node": node or ""})
            pod["metadata"]["uid"] = str(uuid.uuid5(UID_NAMESPACE, "oversized/%s/%s" % (p["namespace"], p["name"])))
            pod["metadata"]["resourceVersion"] = str(state.rv)
            pod["metadata"]["creationTimestamp"] = fake_time(state.rv)
        pod["metadata"].setdefault("annotations", {})["aiqos.test/padding"] = "x" * p["bytes"]
        return pod

    # -- watch

    def serve_watch(self, ns, fields, labels, params, stream):
        state = self.server.state
        rv_text = params.get("resourceVersion", "")
        rv = self.rv_param(params)
        bookmarks = truthy(params.get("allowWatchBookmarks"))
        send_initial = truthy(params.get("sendInitialEvents"))
        timeout_s = self.int_param(params, "timeoutSeconds", 0)
        limits = [t for t in (timeout_s, state.config["max_watch_seconds"]) if t > 0]
        deadline = time.monotonic() + min(limits) if limits else None
        node = self.node_of(fields)

        def matches(obj):
            if ns is not None and obj["metadata"]["namespace"] != ns:
                return False
            return selector_matches(obj, fields, labels)

        initial = []
        with state.lock:
            if rv_text in ("", "0") or send_initial:
                initial = [p for k, p in sorted(state.pods.items()) if matches(p)]
                cursor = state.rv
            else:
                cursor = rv  # below the compaction point: watch_wait() answers with a 410 ERROR event
            ws = state.register_watch(
                cursor, bookmarks, deadline, {"node": node, "namespace": ns, "resourceVersion": rv_text, "bookmarks": bookmarks, "cursor": str(cursor)}
            )
        ws.drop_bookmarks = "drop_bookmarks" in stream
        counters = {"events": 0, "bookmarks": 0}
        end = "ended"
        try:
            self.start_chunked(200)
            w = StreamWriter(self, stream.get("slow"))
            sess = _WatchSession(self, stream, counters, node, rv_text)
            items = []
            sess.inject(items)
            for pod in initial:
                if sess.stopped:
                    break
                sess.add(items, dumps({"type": "ADDED", "object": pod}) + b"\n")
            if send_initial and bookmarks and not sess.stopped:
                sess.add(items, bookmark_line(cursor, True), bookmark=True)
                ws.last_bookmark = time.monotonic()
            if sess.stopped:
                end = sess.end
                state.update_record(self.rec, end=end, events_sent=counters["events"], bookmarks_sent=counters["bookmarks"])
            w.write_items(items)
            if sess.stopped:
                return
            while True:
                action, payload = state.watch_wait(ws)
                items = []
                if action == "idle":
                    if self.client_gone():
                        end = "client-gone"
                        self.close_connection = True
                        return
                    continue
                if action == "events":
                    slow = stream.get("slow")
                    if slow and slow.params["mode"] in ("coalesce", "pattern") and slow.params["batch_ms"] > 0:
                        time.sleep(slow.params["batch_ms"] / 1000.0)
                        more_action, more = state.watch_wait(ws, max_wait=0)
                        if more_action == "events":
                            payload = payload + more
                    for e in payload:
                        line = self.translate(e, matches)
                        if line is not None:
                            sess.add(items, line)
                            if sess.stopped:
                                break
                elif action == "bookmark":
                    sess.add(items, bookmark_line(payload, state.config["bookmark_annotation"]), bookmark=True)
                    ws.last_bookmark = time.monotonic()
                elif action == "expired":
                    items.append(("line", error_line(410, "Expired", payload)))
                    items.append(("end", None))
                    sess.stop("expired")
                elif action == "closed":
                    if payload == "end":
                        items.append(("end", None))
                        sess.stop("closed")
                    else:
                        w.write_items(items)
                        end = "closed-" + payload
                        state.update_record(self.rec, end=end)
                        self.abort_connection(payload)
                        raise StreamAborted()
                else:  # timeout or shutdown: end the body cleanly
                    items.append(("end", None))
                    sess.stop(action)
                if sess.stopped:
                    end = sess.end
                    state.update_record(self.rec, end=end, events_sent=counters["events"], bookmarks_sent=counters["bookmarks"])
                w.write_items(items)
                if sess.stopped:
                    return
        except StreamAborted:
            if end == "ended":
                end = "reset"
            raise
        except (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout, OSError):
            end = "client-gone"
            self.close_connection = True
        finally:
            state.unregister_watch(ws)
            state.update_record(self.rec, end=end, events_sent=counters["events"], bookmarks_sent=counters["bookmarks"])

    @staticmethod
    def translate(e, matches):
        """Log entry -> watch line for this watcher, with field-selector transitions."""
        if e.type == "ADDED":
            return e.line("ADDED") if matches(e.obj) else None
        if e.type == "DELETED":
            return e.line("DELETED") if matches(e.obj) else None
        was = e.prev is not None and matches(e.prev)
        now = matches(e.obj)
        if was and now:
            return e.line("MODIFIED")
        if now:
            return e.line("ADDED")
        if was:
            return e.left_line()
        return None


class _WatchSession:
    """Orders a watch stream's events with the injected faults (garbage, oversized, gone, reset)."""

    def __init__(self, handler, stream, counters, node, rv_text):
        self.h = handler
        self.rv_text = rv_text
        self.counters = counters
        self.node = node
        self.reset = stream.get("reset")
        self.pending = [f for t, f in sorted(stream.items(), key=lambda kv: kv[1].id) if t in ("garbage", "oversized", "gone")]
        self.stopped = False
        self.end = None

    def stop(self, why):
        self.stopped = True
        self.end = why

    def add(self, items, line, bookmark=False):
        if self.stopped:
            return
        if self.reset is not None and self.counters["events"] + self.counters["bookmarks"] == self.reset.params["after_events"]:
            items.append(("abort", (line, self.reset.params["how"], self.reset.params["in_chunk"])))
            self.stop("reset")
            return
        items.append(("line", line))
        self.counters["bookmarks" if bookmark else "events"] += 1
        self.inject(items)

    def inject(self, items):
        sent = self.counters["events"] + self.counters["bookmarks"]
        for f in list(self.pending):
            if self.stopped:
                return
            if sent < f.params["after_events"]:
                continue
            self.pending.remove(f)
            if f.type == "garbage":
                items.append(("line", f.params["line"].encode() + b"\n"))
            elif f.type == "oversized":
                pod = self.h.oversized_pod(f.params, self.node)
                items.append(("line", dumps({"type": f.params["event_type"], "object": pod}) + b"\n"))
            elif f.type == "gone":
                st = self.h.server.state
                msg = f.params["message"] or "too old resource version: %s (%d)" % (self.rv_text or "0", st.compacted_rv)
                items.append(("line", error_line(410, "Expired", msg)))
                items.append(("end", None))
                self.stop("gone")


# ---------------------------------------------------------------- servers


class ApiServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, state, ssl_ctx, logger):
        self.state = state
        self.ssl_ctx = ssl_ctx
        self.log = logger
        self.busy = 0
        self.busy_lock = threading.Lock()
        self.conns = set()
        super().__init__(addr, ApiHandler)

    def get_request(self):
        sock, addr = self.socket.accept()
        return self.ssl_ctx.wrap_socket(sock, server_side=True, do_handshake_on_connect=False), addr

    def finish_request(self, request, client_address):
        with self.busy_lock:
            self.busy += 1
            self.conns.add(request)
        try:
            f = self.state.take_connect_fault()
            if f is not None:
                self.state.count("hang_connect")
                end = None if f.params["seconds"] is None else time.monotonic() + f.params["seconds"]
                while not f.released.is_set() and not self.state.closing:
                    if end is not None and time.monotonic() >= end:
                        break
                    f.released.wait(0.1)
                return
            try:
                request.settimeout(HANDSHAKE_TIMEOUT_S)
                request.do_handshake()
                request.settimeout(IDLE_TIMEOUT_S)
            except (ssl.SSLError, OSError) as e:
                self.state.count("tls_failure")
                with self.state.lock:
                    self.state.tls_errors.append(str(e))
                self.log("%s TLS handshake failed: %s" % (client_address[0], e))
                return
            self.RequestHandlerClass(request, client_address, self)
        finally:
            with self.busy_lock:
                self.busy -= 1
                self.conns.discard(request)

    def handle_error(self, request, client_address):
        self.log("%s handler error: %s" % (client_address[0], sys.exc_info()[1]))

    def drop_connections(self):
        with self.busy_lock:
            conns = list(self.conns)
        for c in conns:
            try:
                socket.socket.shutdown(c, socket.SHUT_RDWR)
            except OSError:
                pass


class ControlHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "fakeapi-control/1"
    sys_version = ""
    timeout = IDLE_TIMEOUT_S

    def log_message(self, fmt, *args):
        pass

    def do_GET(self):
        self.dispatch()

    def do_POST(self):
        self.dispatch()

    def do_PUT(self):
        self.dispatch()

    def do_PATCH(self):
        self.dispatch()

    def do_DELETE(self):
        self.dispatch()

    def reply(self, code, obj):
        body = dumps(obj)
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def dispatch(self):
        url = urllib.parse.urlsplit(self.path)
        params = {k: v[-1] for k, v in urllib.parse.parse_qs(url.query, keep_blank_values=True).items()}
        try:
            n = int(self.headers.get("Content-Length") or 0)
            if n > CONTROL_MAX_BODY:
                self.close_connection = True
                return self.reply(413, {"error": "body larger than %d bytes" % CONTROL_MAX_BODY})
            raw = self.rfile.read(n) if n > 0 else b""
            body = json.loads(raw) if raw.strip() else None
        except ValueError as e:
            return self.reply(400, {"error": "invalid JSON body: %s" % e})
        try:
            code, obj = self.route(self.command, url.path.rstrip("/") or "/", params, body)
        except Conflict as e:
            code, obj = 409, {"error": str(e)}
        except Missing as e:
            code, obj = 404, {"error": str(e)}
        except (ValueError, TypeError, ApiError) as e:
            code, obj = 400, {"error": str(e)}
        except Exception as e:  # a bug here must reach the test, not hang it
            self.server.log("control %s %s failed: %s" % (self.command, self.path, traceback.format_exc()))
            code, obj = 500, {"error": "%s: %s" % (type(e).__name__, e)}
        self.server.log("control %s %s -> %d" % (self.command, self.path, code))
        self.reply(code, obj)

    def route(self, method, path, params, body):
        st = self.server.state
        parts = [urllib.parse.unquote(p) for p in path.strip("/").split("/")] if path != "/" else []
        if path == "/healthz" and method == "GET":
            return 200, {"ok": True}
        if path == "/state" and method == "GET":
            return 200, st.summary()
        if parts[:1] == ["pods"]:
            return self.route_pods(method, parts[1:], params, body)
        if path == "/compact" and method == "POST":
            rv = (body or {}).get("resourceVersion")
            return 200, {"compacted": str(st.compact(int(rv) if rv is not None else None)), "resourceVersion": str(st.rv)}
        if path == "/token":
            if method == "GET":
                return 200, {"tokens": st.read_tokens(), "file": st.token_file}
            if method == "PUT":
                if not isinstance(body, dict):
                    raise ValueError('body must be {"token": "..."} or {"tokens": [...]}')
                tokens = body.get("tokens") if "tokens" in body else [body.get("token")]
                return 200, {"tokens": st.write_tokens(tokens), "file": st.token_file}
        if path == "/token/rotate" and method == "POST":
            new, tokens = st.rotate_token(bool((body or {}).get("keep_old", False)))
            return 200, {"token": new, "tokens": tokens, "file": st.token_file}
        if parts[:1] == ["faults"]:
            if len(parts) == 1 and method == "GET":
                return 200, {"faults": st.fault_list()}
            if len(parts) == 1 and method == "POST":
                specs = body if isinstance(body, list) else [body]
                added = [st.add_fault(s).to_json() for s in specs]
                return 201, (added if isinstance(body, list) else added[0])
            if len(parts) == 1 and method == "DELETE":
                return 200, {"cleared": st.clear_faults()}
            if len(parts) == 2 and method == "DELETE":
                n = st.clear_faults(int(parts[1]))
                if not n:
                    raise Missing("no fault %s" % parts[1])
                return 200, {"cleared": n}
        if path == "/bookmark" and method == "POST":
            return 200, {"watches": st.bookmark_now()}
        if path == "/watches" and method == "GET":
            return 200, {"watches": st.summary()["watches"]}
        if path == "/watches/close" and method == "POST":
            how = (body or {}).get("how", "end")
            if how not in ("end", "fin", "rst"):
                raise ValueError('how must be "end", "fin" or "rst"')
            return 200, {"watches": st.close_watches(how)}
        if path == "/config":
            if method == "GET":
                return 200, dict(st.config)
            if method in ("PUT", "PATCH", "POST"):
                return 200, st.set_config(body or {})
        if path == "/stats":
            if method == "GET":
                kind = params.get("kind") or None
                return 200, st.stats(int(params.get("since") or 0), kind)
            if method == "DELETE":
                st.reset_stats()
                return 200, {"ok": True}
        if path == "/events":
            if method == "GET":
                fields = parse_field_selector(params.get("fieldSelector"), None) if params.get("fieldSelector") else []
                items, rv = st.list_events(params.get("namespace") or None, "v1", fields)
                return 200, {"kind": "EventList", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}, "items": items}
            if method == "DELETE":
                return 200, {"cleared": st.clear_events()}
        return 404, {"error": "no control endpoint %s %s" % (method, path)}

    def route_pods(self, method, rest, params, body):
        st = self.server.state
        if not rest:
            if method == "GET":
                items, rv = st.all_pods()
                return 200, {"kind": "PodList", "apiVersion": "v1", "metadata": {"resourceVersion": str(rv)}, "items": items}
            if method in ("POST", "PUT"):
                mode = "create" if method == "POST" else "upsert"
                if isinstance(body, dict) and isinstance(body.get("items"), list):
                    results = []
                    for item in body["items"]:
                        etype, pod = st.put_pod(item, mode)
                        results.append({"type": etype, "name": pod["metadata"]["name"], "namespace": pod["metadata"]["namespace"], "resourceVersion": pod["metadata"]["resourceVersion"]})
                    return (201 if mode == "create" else 200), {"results": results, "resourceVersion": str(st.rv)}
                etype, pod = st.put_pod(body, mode)
                return (201 if etype == "ADDED" else 200), {"type": etype, "object": pod, "resourceVersion": pod["metadata"]["resourceVersion"]}
            raise ValueError("method %s not allowed on /pods" % method)
        if len(rest) != 2:
            raise Missing("use /pods/<namespace>/<name>")
        ns, name = rest
        if method == "GET":
            pod = st.get_pod(ns, name)
            if pod is None:
                raise Missing('pod "%s/%s" not found' % (ns, name))
            return 200, pod
        if method == "PUT":
            if not isinstance(body, dict):
                raise ValueError("body must be a pod object")
            body = copy.deepcopy(body)
            if "metadata" in body:
                body["metadata"] = dict(body["metadata"] or {}, namespace=ns, name=name)
            else:
                body.update(namespace=ns, name=name)
            etype, pod = st.put_pod(body, "upsert")
            return (201 if etype == "ADDED" else 200), {"type": etype, "object": pod, "resourceVersion": pod["metadata"]["resourceVersion"]}
        if method == "PATCH":
            etype, pod = st.patch_pod(ns, name, body or {})
            return 200, {"type": etype, "object": pod, "resourceVersion": pod["metadata"]["resourceVersion"]}
        if method == "DELETE":
            graceful = truthy(params.get("graceful", "")) or bool((body or {}).get("graceful", False))
            out = st.delete_pod(ns, name, graceful)
            return 200, {"events": [{"type": t, "resourceVersion": p["metadata"]["resourceVersion"]} for t, p in out], "object": out[-1][1], "resourceVersion": str(st.rv)}
        raise ValueError("method %s not allowed on /pods/<ns>/<name>" % method)


class ControlServer(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, addr, state, logger):
        self.state = state
        self.log = logger
        super().__init__(addr, ControlHandler)

    def handle_error(self, request, client_address):
        self.log("control handler error: %s" % (sys.exc_info()[1],))




# ---------------------------------------------------------------- main


class FakeAPI:
    """The two servers and their shared state; start() binds and serves in threads."""

    def __init__(self, cert, key, token_file, client_ca=None, host="127.0.0.1", port=0, control_port=0, config=None, start_rv=1, quiet=False):
        self._log_lock = threading.Lock()
        self.quiet = quiet
        self.state = State(token_file, config, start_rv)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.minimum_version = ssl.TLSVersion.TLSv1_2
        ctx.load_cert_chain(cert, key)
        ctx.set_alpn_protocols(["http/1.1"])
        if client_ca:
            ctx.load_verify_locations(cafile=client_ca)
            ctx.verify_mode = ssl.CERT_OPTIONAL
        self.api = ApiServer((host, port), self.state, ctx, self.log)
        self.control = ControlServer((host, control_port), self.state, self.log)
        self.threads = []

    def log(self, msg):
        if self.quiet:
            return
        with self._log_lock:
            sys.stderr.write("fakeapi %8.3f %s\n" % (time.monotonic() - self.state.t0, msg))
            sys.stderr.flush()

    @property
    def port(self):
        return self.api.server_address[1]

    @property
    def control_port(self):
        return self.control.server_address[1]

    def start(self):
        for srv in (self.api, self.control):
            t = threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self, grace=2.0):
        """End streams cleanly, stop accepting, then cut what is still open."""
        self.state.begin_shutdown()
        end = time.monotonic() + grace
        while time.monotonic() < end:
            with self.api.busy_lock:
                streaming = len(self.state.watches)
            if streaming == 0:
                break
            time.sleep(0.02)
        stoppers = [threading.Thread(target=s.shutdown) for s in (self.api, self.control)]
        for t in stoppers:
            t.start()
        for t in stoppers:
            t.join()
        self.api.drop_connections()
        self.api.server_close()
        self.control.server_close()


def main(argv=None):
    ap = argparse.ArgumentParser(description="fault-injecting fake Kubernetes API server (aiqos tests)")
    ap.add_argument("--certs", help="directory from gencerts.sh (uses server.crt/server.key)")
    ap.add_argument("--cert", help="server certificate (PEM)")
    ap.add_argument("--key", help="server private key (PEM)")
    ap.add_argument("--client-ca", help="accept client certificates signed by this CA")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=0, help="TLS API port (0: ephemeral)")
    ap.add_argument("--control-port", type=int, default=0, help="plain-HTTP control port (0: ephemeral)")
    ap.add_argument("--token-file", help="valid bearer tokens, one per line, re-read on every request")
    ap.add_argument("--token", help="write this token to the token file at start")
    ap.add_argument("--ready-file", help="also write the ready JSON line here (atomically)")
    ap.add_argument("--bookmark-interval", type=float, default=DEFAULT_CONFIG["bookmark_interval"])
    ap.add_argument("--max-log", type=int, default=DEFAULT_CONFIG["max_log"])
    ap.add_argument("--start-rv", type=int, default=1, help="initial resourceVersion")
    ap.add_argument("--quiet", action="store_true", help="no request log on stderr")
    args = ap.parse_args(argv)

    cert = args.cert or (os.path.join(args.certs, "server.crt") if args.certs else None)
    key = args.key or (os.path.join(args.certs, "server.key") if args.certs else None)
    if not cert or not key:
        ap.error("--certs DIR or --cert and --key are required")
    if args.host not in ("127.0.0.1", "::1", "localhost"):
        ap.error("--host must be a loopback address")
    token_file = args.token_file
    tmpdir = None
    if not token_file:
        tmpdir = tempfile.mkdtemp(prefix="fakeapi-")
        token_file = os.path.join(tmpdir, "token")
        if not args.token:
            args.token = "fake-token"
    srv = FakeAPI(
        cert,
        key,
        token_file,
        client_ca=args.client_ca,
        host=args.host,
        port=args.port,
        control_port=args.control_port,
        config={"bookmark_interval": args.bookmark_interval, "max_log": args.max_log},
        start_rv=args.start_rv,
    )
    if args.token:
        srv.state.write_tokens([args.token])
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    signal.signal(signal.SIGINT, lambda *_: stop.set())
    srv.start()
    ready = json.dumps({"port": srv.port, "control_port": srv.control_port, "token_file": token_file, "pid": os.getpid()})
    if args.ready_file:
        tmp = args.ready_file + ".tmp"
        with open(tmp, "w") as f:
            f.write(ready + "\n")
        os.replace(tmp, args.ready_file)
    sys.stdout.write(ready + "\n")
    sys.stdout.flush()
    srv.log("listening on https://%s:%d (control http://%s:%d)" % (args.host, srv.port, args.host, srv.control_port))
    stop.wait()  # the signal handlers run in this thread and set it
    srv.log("stopping")
    srv.stop()
    if tmpdir:
        try:
            os.unlink(token_file)
            os.rmdir(tmpdir)
        except OSError:
            pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
