#!/usr/bin/env bash
# Benchmark (not a test; run by `make bench` through tests/k8s/run.sh BUILD bench_cache_rss):
# the controller's resident memory with N pods (default 10,000) in its pod informer's cache.
# The pods are created straight through the API (one curl process, parallel transfers,
# generateName) with a realistic spec — env, volumes, probes, resources, tolerations — and
# bound to nodes, so the API server adds its defaults and managedFields as it does for any
# pod. The controller is started once they exist; its VmRSS and VmHWM are read from /proc
# after every informer synced. Prints `ok:` lines and one JSON line.
. "$(dirname "$0")/lib.sh"
GQ_CTL_DEFAULT_ARGS=  # benchmarks measure the controller's defaults
N=${GQ_BENCH_PODS:-10000}
ns=$(fresh_ns bench)

pod="$GQ_TEST_TMP/pod.json"
cat >"$pod" <<'EOP'
{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"train-7d9f8c6b5-",
 "labels":{"app":"train","pod-template-hash":"7d9f8c6b5","team":"research","app.kubernetes.io/part-of":"ml-platform"},
 "annotations":{"prometheus.io/scrape":"true","prometheus.io/port":"9090"}},
 "spec":{"nodeName":"gpu-node-0001","restartPolicy":"Always",
  "volumes":[{"name":"data","persistentVolumeClaim":{"claimName":"data"}},
   {"name":"shm","emptyDir":{"medium":"Memory","sizeLimit":"16Gi"}}],
  "containers":[{"name":"main","image":"registry.example.com/ml/train:1.4.2",
   "command":["torchrun"],"args":["--nnodes=4","--nproc-per-node=8","train.py","--config=/data/config.yaml"],
   "ports":[{"name":"metrics","containerPort":9090}],
   "env":[{"name":"MASTER_ADDR","value":"train-0.train"},{"name":"MASTER_PORT","value":"29500"},
    {"name":"WORLD_SIZE","value":"32"},{"name":"NCCL_DEBUG","value":"WARN"}],
   "resources":{"limits":{"nvidia.com/gpu":"8","memory":"256Gi"},"requests":{"cpu":"32","memory":"256Gi","nvidia.com/gpu":"8"}},
   "volumeMounts":[{"name":"data","mountPath":"/data"},{"name":"shm","mountPath":"/dev/shm"}],
   "readinessProbe":{"httpGet":{"path":"/healthz","port":9090},"periodSeconds":10}}],
  "tolerations":[{"key":"nvidia.com/gpu","operator":"Exists","effect":"NoSchedule"}]}}
EOP

# create_pods COUNT: POST the pod COUNT times (8 transfers in flight); prints how many got 201.
create_pods() {
  local cfg="$GQ_TEST_TMP/curl.cfg" i
  : >"$cfg"
  for i in $(seq 1 "$1"); do
    [ "$i" = 1 ] || echo next >>"$cfg"
    cat >>"$cfg" <<EOC
url = "$GQ_SERVER/api/v1/namespaces/$ns/pods"
cacert = "$GQ_CA"
header = "Authorization: Bearer $GQ_TOKEN"
header = "Content-Type: application/json"
data-binary = "@$pod"
output = "/dev/null"
write-out = "%{http_code}\n"
EOC
  done
  curl -sS --no-progress-meter --parallel --parallel-max 8 -K "$cfg" 2>>"$GQ_TEST_TMP/curl.log" | grep -c '^201$' || true
}
t=$(date +%s)
created=0
# an API server under load answers a few creates with 500: ask again for those
for round in 1 2 3; do
  [ "$created" -lt "$N" ] || break
  created=$(( created + $(create_pods $(( N - created ))) ))
done
assert_eq "$N" "$created" "pods created"
list_bytes=$(curl -sS --cacert "$GQ_CA" -H "Authorization: Bearer $GQ_TOKEN" "$GQ_SERVER/api/v1/pods" | wc -c)
pass "$N pods created in $(( $(date +%s) - t )) s; the API server lists them in $list_bytes bytes ($(( list_bytes / N )) bytes per pod)"

gq_ctl_start --listen 127.0.0.1:0
wait_for 60 "pods listed" grep -q "informer=pods objects=$N " "$GQ_TEST_TMP/controller.log"
port=$(gq_ctl_port)
wait_for 60 "/readyz 200" curl -sf "http://127.0.0.1:$port/readyz"
sleep 3
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$GQ_CTL_PID/status")
hwm=$(awk '/^VmHWM:/ {print $2}' "/proc/$GQ_CTL_PID/status")
pass "controller with $N pods cached: VmRSS $(( rss / 1024 )) MiB, peak (VmHWM) $(( hwm / 1024 )) MiB"
printf '{"pods":%d,"list_bytes_per_pod":%d,"rss_kb":%d,"hwm_kb":%d}\n' "$N" $(( list_bytes / N )) "$rss" "$hwm"
