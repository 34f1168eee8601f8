#!/usr/bin/env python3
"""benchtool — load generator and fast fake kubelet for the API-server benchmarks
(bench_kueue.sh, bench_stream.sh). Standard library only. Connects with GQ_SERVER,
GQ_TOKEN and GQ_CA (from `. ENV_DIR/env`).

  benchtool.py nodes PREFIX COUNT GPUS [GPU_PRODUCT [CPU MEMORY]]
      create COUNT Nodes PREFIX-1..COUNT, Ready, untainted, with GPUS nvidia.com/gpu (and CPU
      and MEMORY as quantities, default 256 and 2Ti)
  benchtool.py kueue CONFIG.json
      Kueue's scheduler benchmark shape: per queue (namespace) several concurrent streams of
      GPUJobs created at fixed intervals; a fake kubelet runs every pod bound to a node for
      its runtime (annotation bench/runtime-ms, counted from when the pod is seen
      bound) and finishes graceful deletes; waits until every job is Succeeded and prints
      one JSON object with the figures. With "sequential": true the jobs are created one
      after the other in the classes' order (a burst, as knavigator submits it); with
      "cluster_gpus" (or "cluster_cpus") it also prints the cluster's GPU (CPU) occupancy. A
      class may give its pods' "cpu" and "memory" requests (quantities; "gpus": 0 makes
      CPU-only jobs; "max_run_s" sets spec.maxRunSeconds).
  benchtool.py stream KIND NAMESPACE N CLIENTS
      create N objects (KIND gpujob: single-replica 1-GPU GPUJobs; KIND pod: plain pods
      requesting one nvidia.com/gpu, for kube-scheduler) from CLIENTS parallel clients and
      wait until N pods of the namespace are bound; prints one JSON object.

Times are this process's monotonic clock: a job's time to admission runs from its create
request's 201 to the first of its pods seen bound on the pod watch.
"""
import heapq
import http.client
import json
import os
import queue
import resource
import ssl
import sys
import threading
import time
import urllib.parse

RUNTIME_KEY = "bench/runtime-ms"


def die(msg):
    print("benchtool: " + msg, file=sys.stderr)
    sys.exit(1)


class Api:
    def __init__(self):
        for v in ("GQ_SERVER", "GQ_TOKEN", "GQ_CA"):
            if not os.environ.get(v):
                die(v + " is not set (source ENV_DIR/env)")
        u = urllib.parse.urlparse(os.environ["GQ_SERVER"])
        self.host, self.port = u.hostname, u.port or 443
        self.ctx = ssl.create_default_context(cafile=os.environ["GQ_CA"])
        self.token = os.environ["GQ_TOKEN"]
        self.local = threading.local()
        self.errors = 0
        self.lock = threading.Lock()

    def conn(self, timeout=60):
        return http.client.HTTPSConnection(self.host, self.port, context=self.ctx, timeout=timeout)

    def req(self, method, path, body=None, ctype="application/json"):
        """One request on this thread's keep-alive connection; (status, parsed body or None).
        Connection errors and 5xx/429 are retried (up to 5 times)."""
        data = None if body is None else json.dumps(body).encode()
        hdr = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        if data is not None:
            hdr["Content-Type"] = ctype
        for attempt in range(6):
            c = getattr(self.local, "c", None)
            if c is None:
                c = self.local.c = self.conn()
            try:
                c.request(method, path, body=data, headers=hdr)
                r = c.getresponse()
                raw = r.read()
            except (OSError, http.client.HTTPException):
                try:
                    c.close()
                except Exception:
                    pass
                self.local.c = None
                time.sleep(0.05 * (attempt + 1))
                continue
            if r.status in (429, 500, 503, 504) and attempt < 5:
                time.sleep(0.05 * (attempt + 1))
                continue
            if r.status >= 400 and r.status not in (404, 409):
                with self.lock:
                    self.errors += 1
                    if self.errors <= 10:
                        print("benchtool: %s %s -> %d %s" % (method, path, r.status, raw[:300]), file=sys.stderr)
            try:
                return r.status, json.loads(raw) if raw else None
            except ValueError:
                return r.status, None
        with self.lock:
            self.errors += 1
        return 0, None

    def watch(self, path, rv, on_event, stop):
        """Watch PATH (a collection) from resourceVersion RV, calling on_event(type, obj) for
        every event until stop is set; reconnects from the last resourceVersion seen."""
        while not stop.is_set():
            c = self.conn(timeout=3600)
            sep = "&" if "?" in path else "?"
            try:
                c.request("GET", "%s%swatch=1&allowWatchBookmarks=true&resourceVersion=%s" % (path, sep, rv),
                          headers={"Authorization": "Bearer " + self.token})
                r = c.getresponse()
                if r.status != 200:
                    die("watch %s: HTTP %d %s" % (path, r.status, r.read()[:300]))
                while not stop.is_set():
                    line = r.readline()
                    if not line:
                        break
                    ev = json.loads(line)
                    obj = ev.get("object") or {}
                    if ev.get("type") == "ERROR":
                        die("watch %s: %s" % (path, obj))
                    rv = (obj.get("metadata") or {}).get("resourceVersion", rv)
                    if ev.get("type") != "BOOKMARK":
                        on_event(ev["type"], obj)
            except (OSError, http.client.HTTPException, ValueError):
                pass
            finally:
                c.close()

    def list_rv(self, path):
        st, body = self.req("GET", path + ("&" if "?" in path else "?") + "limit=1")
        if st != 200:
            die("list %s: HTTP %d" % (path, st))
        return body["metadata"]["resourceVersion"]


class Pool:
    """Worker threads running callables from a queue, and a timer heap feeding it."""

    def __init__(self, workers):
        self.q = queue.Queue()
        self.heap = []
        self.cv = threading.Condition()
        self.seq = 0
        for _ in range(workers):
            threading.Thread(target=self._work, daemon=True).start()
        threading.Thread(target=self._timer, daemon=True).start()

    def _work(self):
        while True:
            fn = self.q.get()
            try:
                fn()
            except Exception as e:  # a benchmark worker must not die silently
                print("benchtool: worker: %r" % (e,), file=sys.stderr)

    def _timer(self):
        while True:
            with self.cv:
                while not self.heap or self.heap[0][0] > time.monotonic():
                    self.cv.wait(None if not self.heap else max(0.0, self.heap[0][0] - time.monotonic()))
                _, _, fn = heapq.heappop(self.heap)
            self.q.put(fn)

    def at(self, when, fn):
        with self.cv:
            self.seq += 1
            heapq.heappush(self.heap, (when, self.seq, fn))
            self.cv.notify()

    def now(self, fn):
        self.q.put(fn)


def utc_now():
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def cmd_nodes(api, prefix, count, gpus, product="NVIDIA-A100-SXM4-40GB", cpu="256", memory="2Ti"):
    count, pool, done = int(count), Pool(16), threading.Semaphore(0)
    cap = {"cpu": cpu, "memory": memory, "pods": "250", "ephemeral-storage": "1Ti", "nvidia.com/gpu": str(gpus)}

    def one(i):
        name = "%s-%d" % (prefix, i)
        api.req("POST", "/api/v1/nodes", {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name, "labels": {
            "kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
            "nvidia.com/gpu.product": product, "nvidia.com/gpu.memory": "40960"}}})
        t = utc_now()
        conds = [{"type": ty, "status": "False", "reason": rs, "message": "benchtool",
                  "lastHeartbeatTime": t, "lastTransitionTime": t}
                 for ty, rs in (("MemoryPressure", "KubeletHasSufficientMemory"),
                                ("DiskPressure", "KubeletHasNoDiskPressure"),
                                ("PIDPressure", "KubeletHasSufficientPID"))]
        conds.append({"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "benchtool",
                      "lastHeartbeatTime": t, "lastTransitionTime": t})
        st, _ = api.req("PATCH", "/api/v1/nodes/%s/status" % name, {"status": {
            "capacity": cap, "allocatable": cap, "conditions": conds,
            "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}, {"type": "Hostname", "address": name}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "nodeInfo": {"machineID": name, "systemUUID": name, "bootID": name, "kernelVersion": "benchtool",
                         "osImage": "benchtool", "containerRuntimeVersion": "benchtool://1",
                         "kubeletVersion": "v1.20.2", "kubeProxyVersion": "v1.20.2",
                         "operatingSystem": "linux", "architecture": "amd64"}}},
            "application/merge-patch+json")
        st2, _ = api.req("PATCH", "/api/v1/nodes/" + name, {"spec": {"taints": None}}, "application/merge-patch+json")
        if st != 200 or st2 != 200:
            die("node %s: status patch HTTP %d, taint patch HTTP %d" % (name, st, st2))
        done.release()

    for i in range(1, count + 1):
        pool.now(lambda i=i: one(i))
    for _ in range(count):
        done.acquire()
    print("benchtool: %d nodes %s-1..%d Ready with %s GPUs" % (count, prefix, count, gpus), file=sys.stderr)


def gpujob(ns, name, replicas, gpus, priority, runtime_ms, cpu="100m", memory="128Mi", max_run_s=None):
    spec = {"class": "Batch", "replicas": replicas,
            "template": {"metadata": {"annotations": {RUNTIME_KEY: str(runtime_ms)}},
                         "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                                  "containers": [{"name": "main", "image": "busybox",
                                                  "resources": {"requests": {"cpu": cpu, "memory": memory}}}]}}}
    if gpus:
        spec["gpu"] = {"count": gpus}
    if max_run_s:
        spec["maxRunSeconds"] = int(max_run_s)
    if priority is not None:
        spec["priority"] = priority
    return {"apiVersion": "gangq.io/v1alpha1", "kind": "GPUJob", "metadata": {"name": name, "namespace": ns},
            "spec": spec}


def cpu_cores(q):
    """A CPU quantity ("2", "500m", "1.5") in cores; 0 when absent or not understood."""
    try:
        q = str(q or "0")
        return float(q[:-1]) / 1000.0 if q.endswith("m") else float(q)
    except ValueError:
        return 0.0


def pct(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


class Fakelet:
    """Runs every pod bound to a node: Running when first seen bound, Succeeded RUNTIME_KEY ms
    after it was first seen bound, once Running is written (0 or absent: stays Running), and
    finishes graceful deletes at once."""

    def __init__(self, api, pool, run=True):
        self.api, self.pool, self.run = api, pool, run
        self.lock = threading.Lock()
        self.seen = {}        # pod uid -> dict(ns, name, job, attempt, gpus, start, end, deleted)
        self.first_bound = {}  # (ns, job) -> monotonic time the first pod of the job was seen bound
        self.bound = {}       # ns -> number of distinct pods seen bound
        self.last_bound = 0.0

    def on_event(self, typ, pod):
        md, spec = pod.get("metadata") or {}, pod.get("spec") or {}
        uid, node = md.get("uid"), spec.get("nodeName")
        if not uid or not node:
            return
        now = time.monotonic()
        ns, name = md.get("namespace"), md.get("name")
        labels = md.get("labels") or {}
        with self.lock:
            p = self.seen.get(uid)
            if p is None:
                gpus, cpu = 0, 0.0
                for c in spec.get("containers") or []:
                    lim = ((c.get("resources") or {}).get("requests") or {}).get("nvidia.com/gpu") \
                        or ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
                    gpus += int(lim or 0)
                    cpu += cpu_cores(((c.get("resources") or {}).get("requests") or {}).get("cpu"))
                p = self.seen[uid] = {"ns": ns, "name": name, "job": labels.get("gangq.io/job"),
                                      "attempt": labels.get("gangq.io/attempt"), "gpus": gpus, "cpu": cpu,
                                      "start": now, "end": None, "deleted": False, "phase": None}
                self.bound[ns] = self.bound.get(ns, 0) + 1
                self.last_bound = now
                key = (ns, p["job"])
                if p["job"] and key not in self.first_bound:
                    self.first_bound[key] = now
                fresh = True
            else:
                fresh = False
            p["phase"] = (pod.get("status") or {}).get("phase")
            gone = typ == "DELETED" or md.get("deletionTimestamp")
            if gone and not p["deleted"]:
                p["deleted"] = True
                if p["end"] is None:
                    p["end"] = now
                if typ != "DELETED" and self.run:
                    self.pool.now(lambda: self._delete(ns, name, uid))
                return
        if fresh and self.run and not gone and p["phase"] == "Pending":
            ms = int(((md.get("annotations") or {}).get(RUNTIME_KEY)) or 0)
            self.pool.now(lambda: self._start(uid, ns, name, ms))

    def _patch(self, ns, name, body):
        self.api.req("PATCH", "/api/v1/namespaces/%s/pods/%s/status" % (ns, name), body,
                     "application/merge-patch+json")

    def _start(self, uid, ns, name, ms):
        # Succeeded is only scheduled once Running is written: two workers must not race
        # the two patches (a late Running would overwrite Succeeded). The runtime counts
        # from when the pod was seen bound, not from when the Running patch came back: this
        # tool's own round trip is not the job's runtime.
        self._patch(ns, name, {"status": {"phase": "Running", "startTime": utc_now()}})
        if ms > 0:
            with self.lock:
                start = self.seen[uid]["start"]
            self.pool.at(start + ms / 1000.0, lambda: self._succeed(uid, ns, name))

    def _succeed(self, uid, ns, name):
        with self.lock:
            p = self.seen[uid]
            if p["deleted"]:
                return
            p["end"] = time.monotonic()
        t = utc_now()
        self._patch(ns, name, {"status": {"phase": "Succeeded", "containerStatuses": [{
            "name": "main", "image": "busybox", "imageID": "", "ready": False, "restartCount": 0,
            "state": {"terminated": {"exitCode": 0, "reason": "Completed", "startedAt": t, "finishedAt": t}}}]}})

    def _delete(self, ns, name, uid):
        self.api.req("DELETE", "/api/v1/namespaces/%s/pods/%s" % (ns, name),
                     {"kind": "DeleteOptions", "apiVersion": "v1", "gracePeriodSeconds": 0,
                      "preconditions": {"uid": uid}})


def cmd_kueue(api, cfg_path):
    with open(cfg_path) as f:
        cfg = json.load(f)
    queues, classes = cfg["queues"], cfg["classes"]
    pool = Pool(int(cfg.get("workers", 24)))
    stop = threading.Event()
    # The fake kubelet has workers of its own: its patches never wait behind the creates.
    flet = Fakelet(api, Pool(int(cfg.get("kubelet_workers", 128))))
    jobs = {}  # (ns, name) -> dict(cls, created, succeeded)
    jlock = threading.Lock()
    total = sum(c["count"] for c in classes) * len(queues)
    all_done = threading.Event()
    n_succeeded = [0]
    seen = {}  # (ns, name) -> monotonic time this tool's GPUJob watch showed it ADDED

    def on_job(typ, obj):
        md, st = obj.get("metadata") or {}, obj.get("status") or {}
        key = (md.get("namespace"), md.get("name"))
        if typ == "ADDED":
            seen[key] = time.monotonic()
        if st.get("state") != "Succeeded":
            return
        with jlock:
            j = jobs.setdefault(key, {"cls": None, "created": None, "succeeded": None})
            if j["succeeded"] is None:
                j["succeeded"] = time.monotonic()
                n_succeeded[0] += 1
                if n_succeeded[0] >= total:
                    all_done.set()

    prv = api.list_rv("/api/v1/pods")
    jrv = api.list_rv("/apis/gangq.io/v1alpha1/gpujobs")
    threading.Thread(target=api.watch, args=("/api/v1/pods", prv, flet.on_event, stop), daemon=True).start()
    threading.Thread(target=api.watch, args=("/apis/gangq.io/v1alpha1/gpujobs", jrv, on_job, stop),
                     daemon=True).start()
    time.sleep(0.5)

    def create(ns, name, c):
        body = gpujob(ns, name, c["replicas"], c["gpus"], c["priority"], c["runtime_ms"],
                      c.get("cpu", "100m"), c.get("memory", "128Mi"), c.get("max_run_s"))
        st, _ = api.req("POST", "/apis/gangq.io/v1alpha1/namespaces/%s/gpujobs" % ns, body)
        now = time.monotonic()
        with jlock:
            j = jobs.setdefault((ns, name), {"cls": None, "created": None, "succeeded": None})
            j["cls"], j["created"], j["status"] = c["name"], now, st

    t0 = time.monotonic() + 0.2
    if cfg.get("sequential"):
        # A burst submitted in order, each create after the last one's answer (knavigator's
        # SubmitObj tasks): per queue, the classes in their order, each class's jobs in turn.
        def burst():
            for ns in queues:
                for c in classes:
                    for i in range(c["count"]):
                        create(ns, "%s-%d" % (c["name"], i), c)
        pool.at(t0, burst)
    else:
        for ns in queues:
            for c in classes:
                for i in range(c["count"]):
                    name = "%s-%d" % (c["name"], i)
                    pool.at(t0 + i * c["interval_ms"] / 1000.0, lambda ns=ns, name=name, c=c: create(ns, name, c))
    # Until every job Succeeded, the timeout, or no job Succeeded for stall_s once all exist.
    deadline = time.monotonic() + float(cfg.get("timeout_s", 3000))
    stall_s = float(cfg.get("stall_s", 60))
    last_n, last_t, finished, stalled = -1, time.monotonic(), False, False
    while time.monotonic() < deadline:
        if all_done.wait(1.0):
            finished = True
            break
        with jlock:
            n, ncreated = n_succeeded[0], sum(1 for j in jobs.values() if j["created"] is not None)
        if n != last_n:
            last_n, last_t = n, time.monotonic()
        elif ncreated >= total and time.monotonic() - last_t > stall_s:
            stalled = True
            break
    t_end = time.monotonic()
    time.sleep(1.0)  # late events (a duplicate attempt would show here)
    stop.set()

    with jlock:
        jl = dict(jobs)
    created = [j["created"] for j in jl.values() if j["created"] is not None]
    failed_creates = sum(1 for j in jl.values() if j.get("status") not in (None, 201))
    first_create = min(created) if created else t0
    last_done = max((j["succeeded"] for j in jl.values() if j["succeeded"]), default=t_end)
    with flet.lock:
        ends = [p["end"] for p in flet.seen.values() if p["end"] is not None and not p["deleted"]]
    out = {"jobs": total, "created": len(created) - failed_creates, "succeeded": n_succeeded[0],
           "finished": finished, "stalled": stalled, "wall_s": round(last_done - first_create, 1),
           # first create -> the last pod finished (the work done, before its status is written)
           "work_wall_s": round(max(ends) - first_create, 1) if ends else None,
           "create_span_s": round(max(created) - first_create, 1) if created else None,
           "api_client_errors": api.errors, "classes": {}}
    # How far the API server's GPUJob watch lagged: create's 201 -> ADDED on this tool's watch.
    lag = [seen[k] - j["created"] for k, j in jl.items() if j["created"] is not None and k in seen]
    out["watch_delay_s"] = {"mean": round(sum(lag) / len(lag), 1) if lag else None,
                            "p95": round(pct(lag, 95), 1) if lag else None}
    for c in classes:
        waits = []
        for (ns, name), j in jl.items():
            if j["cls"] != c["name"] or j["created"] is None:
                continue
            fb = flet.first_bound.get((ns, name))
            if fb is not None:
                waits.append(fb - j["created"])
        out["classes"][c["name"]] = {"admitted": len(waits),
                                     "mean_s": round(sum(waits) / len(waits), 1) if waits else None,
                                     "p95_s": round(pct(waits, 95), 1) if waits else None}
    # Exactly once: per job, the pods that Succeeded are one attempt's, `replicas` of them.
    by_job = {}
    with flet.lock:
        pods = list(flet.seen.values())
    for p in pods:
        by_job.setdefault((p["ns"], p["job"]), []).append(p)
    reps = {c["name"]: c["replicas"] for c in classes}
    bad, attempts, preempted_pods = [], 0, 0
    for key, j in jl.items():
        ps = by_job.get(key, [])
        ok_pods = [p for p in ps if p["phase"] == "Succeeded"]
        att = {p["attempt"] for p in ok_pods}
        attempts += len({p["attempt"] for p in ps})
        preempted_pods += sum(1 for p in ps if p["deleted"] and p["phase"] != "Succeeded")
        if j["succeeded"] is None or len(att) != 1 or len(ok_pods) != reps.get(j["cls"], -1):
            bad.append("%s/%s: job %s; pods %s" % (
                key[0], key[1], "Succeeded" if j["succeeded"] else "not Succeeded",
                " ".join("%s=%s%s" % (p["name"], p["phase"], "(deleted)" if p["deleted"] else "") for p in ps)))
    out["admissions"] = attempts
    out["preempted_pods"] = preempted_pods
    out["not_exactly_once"] = len(bad)
    out["not_exactly_once_examples"] = bad[:5]
    # Team usage: GPU-seconds of the team's pods (seen bound until finished or deleted) over
    # the wall time, i.e. the mean GPUs in use, per queue.
    span = max(1e-9, last_done - first_create)
    use = {ns: 0.0 for ns in queues}
    for p in pods:
        if p["ns"] in use:
            end = p["end"] if p["end"] is not None else last_done
            use[p["ns"]] += p["gpus"] * max(0.0, min(end, last_done) - max(p["start"], first_create))
    means = [use[ns] / span for ns in queues]
    out["team_usage_gpus"] = {"min": round(min(means), 1), "mean": round(sum(means) / len(means), 1),
                              "nominal": cfg.get("nominal")}
    # The cluster's GPU occupancy (knavigator's measure): GPU-seconds held by pods over the
    # cluster's GPUs, from the first create to the last job Succeeded and to the last pod
    # finished.
    if cfg.get("cluster_gpus"):
        held = sum(use.values())
        work_end = max(ends) if ends else last_done
        out["occupancy_pct"] = round(100.0 * held / (cfg["cluster_gpus"] * span), 1)
        out["work_occupancy_pct"] = round(100.0 * held / (cfg["cluster_gpus"] * max(1e-9, work_end - first_create)), 1)
    if cfg.get("cluster_cpus"):  # the same measure by CPU-seconds, for CPU-only work
        held = sum(p["cpu"] * max(0.0, min(p["end"] if p["end"] is not None else last_done, last_done) -
                                  max(p["start"], first_create)) for p in pods if p["ns"] in use)
        work_end = max(ends) if ends else last_done
        out["cpu_occupancy_pct"] = round(100.0 * held / (cfg["cluster_cpus"] * span), 1)
        out["cpu_work_occupancy_pct"] = round(100.0 * held / (cfg["cluster_cpus"] * max(1e-9, work_end - first_create)), 1)
    # A gang's pods are bound together: per job, first to last of its Succeeded pods seen bound.
    spread = []
    for key, ps in by_job.items():
        st = [p["start"] for p in ps if p["phase"] == "Succeeded"]
        if len(st) > 1:
            spread.append(max(st) - min(st))
    out["gang_bound_spread_s"] = {"max": round(max(spread), 2) if spread else 0.0,
                                  "mean": round(sum(spread) / len(spread), 2) if spread else 0.0}
    # This tool's own CPU (load generator and fake kubelet): it shares the machine.
    ru = resource.getrusage(resource.RUSAGE_SELF)
    out["tool_cpu_s"] = round(ru.ru_utime + ru.ru_stime, 1)
    print(json.dumps(out))


def cmd_stream(api, kind, ns, n, clients):
    n, clients = int(n), int(clients)
    stop = threading.Event()
    flet = Fakelet(api, None, run=False)
    done = threading.Event()

    def on_pod(typ, obj):
        flet.on_event(typ, obj)
        if flet.bound.get(ns, 0) >= n:
            done.set()

    rv = api.list_rv("/api/v1/namespaces/%s/pods" % ns)
    threading.Thread(target=api.watch, args=("/api/v1/namespaces/%s/pods" % ns, rv, on_pod, stop),
                     daemon=True).start()
    time.sleep(0.3)
    if kind == "gpujob":
        path = "/apis/gangq.io/v1alpha1/namespaces/%s/gpujobs" % ns

        def body(i):
            return gpujob(ns, "s%d" % i, 1, 1, None, 0)
    elif kind == "pod":
        path = "/api/v1/namespaces/%s/pods" % ns

        def body(i):
            return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s%d" % i},
                    "spec": {"restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
                             "containers": [{"name": "main", "image": "busybox", "resources": {
                                 "requests": {"cpu": "100m", "memory": "128Mi", "nvidia.com/gpu": "1"},
                                 "limits": {"nvidia.com/gpu": "1"}}}]}}
    else:
        die("stream: KIND is gpujob or pod, got " + kind)
    nxt, lock, bad = [0], threading.Lock(), [0]

    def client():
        while True:
            with lock:
                i = nxt[0]
                nxt[0] += 1
            if i >= n:
                return
            st, _ = api.req("POST", path, body(i))
            if st != 201:
                with lock:
                    bad[0] += 1
    t0 = time.monotonic()
    ts = [threading.Thread(target=client, daemon=True) for _ in range(clients)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    t_created = time.monotonic()
    ok = done.wait(600)
    stop.set()
    print(json.dumps({"kind": kind, "n": n, "clients": clients, "create_failures": bad[0],
                      "bound": flet.bound.get(ns, 0), "finished": ok,
                      "create_s": round(t_created - t0, 2),
                      "first_create_to_last_bound_s": round(flet.last_bound - t0, 2)}))


def main(argv):
    if len(argv) < 2:
        die(__doc__)
    api = Api()
    if argv[1] == "nodes" and len(argv) in (5, 6, 8):
        cmd_nodes(api, *argv[2:])
    elif argv[1] == "kueue" and len(argv) == 3:
        cmd_kueue(api, argv[2])
    elif argv[1] == "stream" and len(argv) == 6:
        cmd_stream(api, *argv[2:])
    else:
        die("usage:\n" + __doc__)


if __name__ == "__main__":
    main(sys.argv)
