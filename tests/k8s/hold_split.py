#!/usr/bin/env python3
"""hold_split — where a benchmark job's quota hold goes, from a kept bench_kueue run.

Usage: python3 tests/k8s/hold_split.py AUDIT_LOG CONTROLLER_LOG [CLASS]

AUDIT_LOG is the API server's audit log (ENV_DIR/audit.log, kept with GQ_KEEP_ENV=1),
CONTROLLER_LOG the controller's log (TMP/bench_kueue/controller.log, kept with
GQ_KEEP_TMP=1). CLASS is the job name prefix (default "large"). For every job of the
class it takes, from the controller's log, when it was admitted, when its first pod
create was sent and when it was reported running and succeeded; from the audit log,
when the API server received its first pod create and finished its last, and when the
fake kubelet's status writes were done: its last replica's Running, its last write
(Succeeded). It
prints the mean, median and 90th percentile of each step in seconds, and first the
wait before the hold: from the controller's first "job queued" to its first "job
admitted" (with the largest wait: a class queued for quota waits longer the later
its jobs come). Standard library only.
"""
import collections
import json
import re
import sys
from datetime import datetime, timezone


def audit_ts(s):
    return datetime.strptime(s[:26].rstrip("Z"), "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()


def log_ts(s):
    return datetime.strptime(s[:23], "%Y-%m-%dT%H:%M:%S.%f").replace(tzinfo=timezone.utc).timestamp()


LOG_RE = re.compile(r'ts=(\S+) .*msg="(job queued|job admitted|job running|job succeeded|creating pod)".*job=(\S+)')
POD_RE = re.compile(r"(.*)-(\d+)-(\d+)$")  # <job>-<attempt>-<replica>


def main(argv):
    if len(argv) < 3:
        sys.exit(__doc__.strip().splitlines()[2])
    audit, log = argv[1], argv[2]
    cls = argv[3] if len(argv) > 3 else "large"
    ev = collections.defaultdict(dict)  # job key -> step -> time
    with open(log) as f:
        for line in f:
            m = LOG_RE.search(line)
            if m and "/" + cls + "-" in m.group(3):
                ev[m.group(3)].setdefault(m.group(2), log_ts(m.group(1)))
    status = collections.defaultdict(list)
    with open(audit) as f:
        for line in f:
            e = json.loads(line)
            o = e.get("objectRef", {})
            name = o.get("name", "")
            if o.get("resource") != "pods" or not name.startswith(cls + "-") or e.get("stage") != "ResponseComplete":
                continue
            m = POD_RE.match(name)
            if not m:
                continue
            k = o.get("namespace", "") + "/" + m.group(1)
            if e.get("verb") == "create":
                ev[k].setdefault("create received", audit_ts(e["requestReceivedTimestamp"]))
                ev[k]["create done"] = max(ev[k].get("create done", 0), audit_ts(e["stageTimestamp"]))
            elif e.get("verb") in ("patch", "update") and o.get("subresource") == "status":
                status[k].append(audit_ts(e["stageTimestamp"]))
    for k, v in status.items():
        # one Running and one Succeeded write per replica: the job runs when
        # its last replica's Running write is done, ends with the last write
        v.sort()
        if len(v) >= 2:
            ev[k]["Running written"] = v[len(v) // 2 - 1]
            ev[k]["Succeeded written"] = v[-1]
    steps = [("job queued", "job admitted"), ("job admitted", "creating pod"), ("creating pod", "create received"),
             ("create received", "create done"), ("create done", "Running written"),
             ("Running written", "Succeeded written"), ("Succeeded written", "job succeeded"),
             ("job admitted", "job succeeded")]
    for a, b in steps:
        g = sorted(v[b] - v[a] for v in ev.values() if a in v and b in v)
        if g:
            n = len(g)
            print("%-17s -> %-17s n=%d mean=%.3f p50=%.3f p90=%.3f max=%.3f" %
                  (a, b, n, sum(g) / n, g[n // 2], g[int(.9 * n)], g[-1]))


if __name__ == "__main__":
    main(sys.argv)
