#!/usr/bin/env bash
# Build the controller image from deploy/Dockerfile and prove it works: the image's own
# `gangq controller`, run as uid 65532, admits a GPUJob on a real kube-apiserver + etcd on
# loopback (tests/k8s/env.sh) with fake-kubelet nodes (tests/k8s/fakelet.sh).
#
#   deploy/test-image.sh                    run it (root; `make image-test`)
#   deploy/test-image.sh --skip-if-missing  print `image-test: SKIPPED (reason: ...)` and exit 0
#                                           when buildah/mmdebstrap are not installed or not
#                                           root (what `make test` calls)
#
# Steps (each printed with its elapsed time; a failure names its step and exits 1):
#   1. base     a Debian 12 (bookworm) minbase root filesystem bootstrapped by mmdebstrap from
#               the Debian mirror apt already uses, cached as a tarball in ~/.cache/gangq/,
#               imported into buildah as localhost/gangq-base:bookworm
#   2. build    `buildah bud` of deploy/Dockerfile with BASE_IMAGE and RUNTIME_IMAGE set to it
#               (both stages install Debian packages with apt through that mirror)
#   3. inspect  the image runs as 65532, its entrypoint is gangq, `gangq version` runs
#   4. cluster  env.sh up; the example namespaces, PriorityClasses, Teams and GPUPools; two
#               fake 8-GPU nodes; the fake kubelet loop (bound pods go Running)
#   5. run      `buildah run --isolation chroot --network host` of the image's controller with
#               a kubeconfig mounted read-only; /healthz answers on the host's loopback
#   6. admit    a 2x4-GPU GPUJob goes Admitted, its two pods are bound to the fake nodes
#               and created by the controller in the container, then Running
#   7. stop     SIGTERM: the controller stops cleanly (exit 0, "controller stopped")
# Cleanup (always, on exit): the controller, the fake kubelet loop, the working container,
# the API server and etcd (env.sh down) and the scratch directory. The base tarball, the
# base image and buildah's layer cache are kept, so a second run skips the bootstrap and the
# apt steps.
#
# Needs: root (rootful buildah, chroot isolation), buildah, mmdebstrap, and what
# tests/k8s/ needs (etcd, kubectl, openssl, curl, jq, ss; the cached kube-apiserver, built
# on first use by tests/k8s/build-apiserver.sh).
# Knobs: GANGQ_CACHE (~/.cache/gangq), GQ_IMAGE_STORAGE_DRIVER (overlay; vfs works, slower),
# GQ_IMAGE_REFRESH=1 (bootstrap the base again), GQ_IMAGE_KEEP=1 (keep the scratch dir).
set -uo pipefail
HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
K8S="$ROOT/tests/k8s"
CACHE="${GANGQ_CACHE:-$HOME/.cache/gangq}"
SUITE=bookworm
ARCH=$(dpkg --print-architecture 2>/dev/null || echo amd64)
BASE_TAR="$CACHE/debian-$SUITE-minbase-$ARCH.tar"
BASE_IMG="localhost/gangq-base:$SUITE"
IMG="localhost/gangq:image-test"
DRIVER="${GQ_IMAGE_STORAGE_DRIVER:-overlay}"
# A private buildah storage under the cache: nothing of the system's container storage is
# touched, and removing $CACHE/containers removes every image this script made.
BH=(buildah --root "$CACHE/containers/$DRIVER" --runroot "/run/gangq-image-test-$DRIVER"
    --storage-driver "$DRIVER")
ISO=(--isolation chroot)

T0=$(date +%s)
STEP="start"
say() { echo "image-test: [$(( $(date +%s) - T0 ))s] $*"; }
step() { STEP="$1"; say "step $1: $2"; }
FAILED=""; TRAPPED=""
die() {
  FAILED="step '$STEP': $*"
  echo "image-test: FAIL at $FAILED" >&2
  # before the cleanup trap is set (tool checks), the final line is printed here
  [ -n "$TRAPPED" ] || echo "image-test: FAIL ($FAILED)"
  exit 1
}
skip() { echo "image-test: SKIPPED (reason: $*)"; exit 0; }

missing=""
for t in buildah mmdebstrap; do command -v "$t" >/dev/null || missing="$missing $t"; done
if [ "${1:-}" = --skip-if-missing ]; then
  [ -z "$missing" ] || skip "buildah/mmdebstrap not installed"
  [ "$(id -u)" = 0 ] || skip "not root; the test uses rootful buildah"
  shift
fi
[ $# -eq 0 ] || { sed -n '2,/^set -uo/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//' >&2; exit 2; }

step tools "checking tools"
[ -z "$missing" ] || die "missing:$missing (apt-get install -y buildah mmdebstrap)"
[ "$(id -u)" = 0 ] || die "must run as root (rootful buildah with chroot isolation)"
for t in etcd kubectl openssl curl jq ss flock; do
  command -v "$t" >/dev/null || die "missing tool $t (scripts/deps.sh installs the test tools)"
done

SCRATCH=$(mktemp -d "${TMPDIR:-/tmp}/gangq-image-test.XXXXXX")
ENV_DIR=""; CTR=""; RUN_PID=""; CTL_PID=""; FAKELET_PID=""

# pid_is PID TEXT: PID is alive and its command line holds TEXT (no recycled-PID kills).
pid_is() {
  [ -n "$1" ] && [ -r "/proc/$1/cmdline" ] && tr '\0' ' ' <"/proc/$1/cmdline" 2>/dev/null | grep -qF -- "$2"
}
# stop_pid PID TEXT WAIT_S: SIGTERM, wait, then SIGKILL. Returns 1 if SIGKILL was needed.
stop_pid() {
  local pid="$1" text="$2" wait_s="$3"
  pid_is "$pid" "$text" || return 0
  kill -TERM "$pid" 2>/dev/null || true
  for _ in $(seq 1 $(( wait_s * 10 ))); do
    pid_is "$pid" "$text" || return 0
    sleep 0.1
  done
  kill -KILL "$pid" 2>/dev/null || true
  return 1
}

cleanup() {
  local rc=$?
  trap - EXIT INT TERM
  set +e
  if [ -z "$CTL_PID" ] && [ -n "$RUN_PID" ]; then CTL_PID=$(cat "$SCRATCH/run/pid" 2>/dev/null); fi
  if [ -n "$CTL_PID" ] && pid_is "$CTL_PID" "gangq controller"; then
    say "cleanup: stopping the controller (pid $CTL_PID)"
    stop_pid "$CTL_PID" "gangq controller" 15
  fi
  if [ -n "$RUN_PID" ]; then
    stop_pid "$RUN_PID" "$SCRATCH" 10
    wait "$RUN_PID" 2>/dev/null
  fi
  if [ -n "$FAKELET_PID" ]; then
    stop_pid "$FAKELET_PID" fakelet.sh 5
    wait "$FAKELET_PID" 2>/dev/null
  fi
  if [ -n "$CTR" ]; then
    if "${BH[@]}" rm "$CTR" >/dev/null 2>&1; then say "cleanup: removed container $CTR"
    else STEP=cleanup; FAILED="${FAILED:-step 'cleanup': could not remove container $CTR}"; rc=1; fi
  fi
  if [ -n "$ENV_DIR" ]; then
    if GQ_KEEP_ENV="" "$K8S/env.sh" down "$ENV_DIR" 2>>"$SCRATCH/env.log"; then say "cleanup: API server and etcd stopped"
    else STEP=cleanup; FAILED="${FAILED:-step 'cleanup': env.sh down could not stop the API server/etcd of $ENV_DIR}"; rc=1; fi
  fi
  if [ $rc -ne 0 ] || [ -n "${GQ_IMAGE_KEEP:-}" ]; then
    say "logs kept in $SCRATCH"
  else
    rm -rf "$SCRATCH"
  fi
  if [ $rc -eq 0 ]; then
    echo "image-test: PASS ($(( $(date +%s) - T0 ))s: $IMG built from deploy/Dockerfile on Debian $SUITE; its controller, uid 65532, admitted a 2-pod GPUJob)"
  else
    echo "image-test: FAIL (${FAILED:-exit $rc}; after $(( $(date +%s) - T0 ))s)"
  fi
  exit $rc
}
trap cleanup EXIT
TRAPPED=1
trap 'FAILED="step '"'"'$STEP'"'"': interrupted by a signal"; exit 130' INT TERM

# Lines `deb URI SUITE COMPONENTS` for the Debian archive apt already uses (deb822 sources
# or sources.list); no host name is written in this repository.
mirror_lines() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk -v suite="$SUITE" '
      function flush(   n, a, i) {
        if (t ~ /(^| )deb( |$)/ && u != "" && k ~ /debian-archive-keyring/) {
          n = split(s, a, " ")
          for (i = 1; i <= n; i++) if (a[i] ~ ("^" suite "(-updates|-security)?$")) print "deb " u " " a[i] " main"
        }
        t = u = s = k = ""
      }
      /^Types:/ { t = $0 } /^URIs:/ { u = $2 } /^Signed-By:/ { k = $0 }
      /^Suites:/ { s = ""; for (i = 2; i <= NF; i++) s = s " " $i }
      /^[ \t]*$/ { flush() } END { flush() }' "$f"
  done
  [ -f /etc/apt/sources.list ] && awk -v suite="$SUITE" \
    '$1 == "deb" && $2 !~ /^\[/ && $3 ~ ("^" suite "(-updates|/updates|-security)?$") { print "deb " $2 " " $3 " main" }' \
    /etc/apt/sources.list
  return 0
}

mkdir -p "$CACHE"
exec 8>"$CACHE/.image-test.lock"
flock -n 8 || { say "another image test holds $CACHE/.image-test.lock; waiting"; flock 8; }

# ---- 1. base image ---------------------------------------------------------------------
step base "Debian $SUITE minbase root filesystem"
if [ -n "${GQ_IMAGE_REFRESH:-}" ]; then rm -f "$BASE_TAR"; fi
if [ -f "$BASE_TAR" ] && [ -s "$BASE_TAR" ]; then
  say "  cached: $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1))"
else
  mirror_lines | sort -u >"$SCRATCH/mirrors.list"
  [ -s "$SCRATCH/mirrors.list" ] || die "no Debian $SUITE mirror found in /etc/apt/sources.list{,.d/}"
  say "  bootstrapping with mmdebstrap from: $(awk '{print $2" "$3}' "$SCRATCH/mirrors.list" | xargs)"
  t=$(date +%s)
  tmp_tar="${BASE_TAR%.tar}.tmp.tar"
  nice mmdebstrap --variant=minbase --mode=root --format=tar --architectures="$ARCH" "$SUITE" "$tmp_tar" - \
    <"$SCRATCH/mirrors.list" >"$SCRATCH/mmdebstrap.log" 2>&1 \
    || { rm -rf "$tmp_tar"; tail -20 "$SCRATCH/mmdebstrap.log" >&2; die "mmdebstrap failed (log above)"; }
  [ -f "$tmp_tar" ] || die "mmdebstrap did not write the tarball $tmp_tar"
  mv "$tmp_tar" "$BASE_TAR"
  say "  bootstrapped in $(( $(date +%s) - t ))s: $BASE_TAR ($(du -h "$BASE_TAR" | cut -f1))"
fi
# (Re)import when the image is missing or the tarball changed since it was imported.
mkdir -p "$CACHE/containers"
mkdir -p "$CACHE/containers"
stamp="$CACHE/containers/$DRIVER.base-stamp"
want="$(stat -c '%s %Y' "$BASE_TAR")"
if "${BH[@]}" inspect --type image "$BASE_IMG" >/dev/null 2>&1 && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
  say "  cached: image $BASE_IMG"
else
  c=$("${BH[@]}" from --name "gangq-base-import-$$" scratch) || die "buildah from scratch failed"
  mnt=$("${BH[@]}" mount "$c") && tar -xf "$BASE_TAR" -C "$mnt" && "${BH[@]}" umount "$c" >/dev/null \
    && "${BH[@]}" config --cmd /bin/bash --label "org.opencontainers.image.description=Debian $SUITE minbase (mmdebstrap)" "$c" \
    && "${BH[@]}" commit -q "$c" "$BASE_IMG" >/dev/null \
    || { "${BH[@]}" rm "$c" >/dev/null 2>&1; die "importing $BASE_TAR as $BASE_IMG failed"; }
  "${BH[@]}" rm "$c" >/dev/null
  echo "$want" >"$stamp"
  say "  imported $BASE_TAR as $BASE_IMG"
fi

# ---- 2. build --------------------------------------------------------------------------
step build "buildah bud -f deploy/Dockerfile (BASE_IMAGE=RUNTIME_IMAGE=$BASE_IMG)"
old_id=$("${BH[@]}" inspect --type image --format '{{.FromImageID}}' "$IMG" 2>/dev/null || true)
t=$(date +%s)
nice "${BH[@]}" bud "${ISO[@]}" --network host --layers --pull=never \
  --build-arg "BASE_IMAGE=$BASE_IMG" --build-arg "RUNTIME_IMAGE=$BASE_IMG" \
  -f "$ROOT/deploy/Dockerfile" -t "$IMG" "$ROOT" >"$SCRATCH/build.log" 2>&1 \
  || { tail -30 "$SCRATCH/build.log" >&2; die "buildah bud failed (last lines above)"; }
new_id=$("${BH[@]}" inspect --type image --format '{{.FromImageID}}' "$IMG")
say "  built $IMG in $(( $(date +%s) - t ))s ($(grep -c -- '--> Using cache' "$SCRATCH/build.log") steps from cache), id ${new_id:0:12}"
# The image this tag named before is superseded: drop it (its layers shared with the new one,
# and the cached build steps, stay).
if [ -n "$old_id" ] && [ "$old_id" != "$new_id" ]; then
  "${BH[@]}" rmi "$old_id" >/dev/null 2>&1 && say "  removed the superseded image ${old_id:0:12}"
fi

# ---- 3. inspect ------------------------------------------------------------------------
step inspect "image configuration and user"
cfg=$("${BH[@]}" inspect --type image --format '{{.OCIv1.Config.User}}|{{.OCIv1.Config.Entrypoint}}|{{.OCIv1.Config.Cmd}}' "$IMG") \
  || die "buildah inspect $IMG failed"
say "  user|entrypoint|cmd: $cfg"
case "$cfg" in 65532*'|[/usr/local/bin/gangq]|[controller '*) ;; *) die "unexpected image config: $cfg" ;; esac
CTR=$("${BH[@]}" from --pull=never --name "gangq-image-test-$$" "$IMG") || die "buildah from $IMG failed"
# What the container prints goes to files in a mounted directory: `buildah run` under load
# was seen to lose the last line of a short-lived command's stdout.
mkdir -p "$SCRATCH/kube" "$SCRATCH/run"
chown -R 65532:65532 "$SCRATCH/kube" "$SCRATCH/run" || die "chown of $SCRATCH/{kube,run} to 65532 failed"
out=$("${BH[@]}" run "${ISO[@]}" -v "$SCRATCH/run:/run/gangq" "$CTR" -- \
  sh -c 'id -u >/run/gangq/uid && /usr/local/bin/gangq version >/run/gangq/version' 2>&1) \
  || die "running id/gangq version in the container failed: $out"
uid=$(cat "$SCRATCH/run/uid" 2>/dev/null)
[ "$uid" = 65532 ] || die "the container runs as uid '$uid', expected 65532"
ver=$(cat "$SCRATCH/run/version" 2>/dev/null)
case "$ver" in "gangq "*) ;; *) die "gangq version in the container printed '$ver'" ;; esac
say "  runs as uid 65532; $ver"

# ---- 4. cluster ------------------------------------------------------------------------
step cluster "kube-apiserver + etcd on loopback, fake nodes, fake kubelet"
ENV_DIR=$("$K8S/env.sh" up 2>"$SCRATCH/env.log") || { ENV_DIR=""; tail -20 "$SCRATCH/env.log" >&2; die "env.sh up failed"; }
. "$ENV_DIR/env"
say "  API server $GQ_SERVER (env $ENV_DIR)"
kubectl apply -f "$ROOT/examples/manifests/00-namespaces.yaml" -f "$ROOT/examples/manifests/01-priorityclasses.yaml" \
  -f "$ROOT/examples/manifests/02-teams.yaml" -f "$ROOT/examples/manifests/03-pools.yaml" >"$SCRATCH/apply.log" 2>&1 \
  || { cat "$SCRATCH/apply.log" >&2; die "applying examples/manifests/0*.yaml failed"; }
for n in a100-01 a100-02; do
  "$K8S/fakelet.sh" add-node "$n" --gpus 8 --cpu 64 --memory 512Gi --label gangq.io/pool=batch \
    --label nvidia.com/gpu.product=NVIDIA-A100-SXM4-40GB --label nvidia.com/gpu.memory=40960 \
    --label topology.gangq.io/rack=rack-3 --label topology.kubernetes.io/zone=zone-b \
    --label topology.gangq.io/block=block-b1 --label "kubernetes.io/hostname=$n" >>"$SCRATCH/fakelet.log" 2>&1 \
    || { tail -5 "$SCRATCH/fakelet.log" >&2; die "fakelet add-node $n failed"; }
done
"$K8S/fakelet.sh" loop --interval 0.5 --auto-run >>"$SCRATCH/fakelet.log" 2>&1 &
FAKELET_PID=$!
say "  namespaces, PriorityClasses, Teams, GPUPools applied; nodes a100-01 a100-02 (8 GPUs each) Ready; fake kubelet pid $FAKELET_PID"

# ---- 5. run ----------------------------------------------------------------------------
step run "the image's controller in the container (host network, uid 65532)"
# The kubeconfig with its CA inlined, readable by the container's user only.
kubectl config view --raw --flatten >"$SCRATCH/kube/kubeconfig" || die "kubectl config view failed"
chown 65532:65532 "$SCRATCH/kube/kubeconfig" && chmod 0700 "$SCRATCH/kube" && chmod 0600 "$SCRATCH/kube/kubeconfig" \
  || die "could not hand the kubeconfig to uid 65532"
# `buildah run` does not forward SIGTERM (it kills its child), so the shell writes its PID
# (the host's: chroot isolation has no PID namespace) and execs the controller; step 7
# signals that PID directly. The controller logs to a file in the mounted directory.
LOG="$SCRATCH/run/controller.log"
"${BH[@]}" run "${ISO[@]}" --network host -v "$SCRATCH/kube:/etc/gangq:ro" -v "$SCRATCH/run:/run/gangq" "$CTR" -- \
  /bin/sh -c 'echo $$ >/run/gangq/pid && exec /usr/local/bin/gangq controller --kubeconfig /etc/gangq/kubeconfig --db /var/lib/gangq/gangq.db --listen 127.0.0.1:0 >>/run/gangq/controller.log 2>&1' \
  >"$SCRATCH/buildah-run.log" 2>&1 </dev/null &
RUN_PID=$!
ok=""
for _ in $(seq 1 120); do
  if grep -q 'leading: cycles on' "$LOG" 2>/dev/null; then ok=1; break; fi
  kill -0 "$RUN_PID" 2>/dev/null || break
  sleep 0.25
done
CTL_PID=$(cat "$SCRATCH/run/pid" 2>/dev/null || true)
[ -n "$ok" ] || { tail -20 "$LOG" "$SCRATCH/buildah-run.log" >&2; die "the controller did not start leading within 30 s (logs above)"; }
pid_is "$CTL_PID" "gangq controller" || die "pid file $SCRATCH/run/pid ($CTL_PID) does not name the running controller"
uid=$(awk '/^Uid:/{print $2}' "/proc/$CTL_PID/status")
[ "$uid" = 65532 ] || die "the controller process runs as uid $uid, expected 65532"
port=$(grep -o 'http server listening.*port=[0-9]*' "$LOG" | grep -o '[0-9]*$' | head -1)
[ -n "$port" ] || die "no 'http server listening ... port=' line in the controller log"
hz=$(curl -sf -m 5 "http://127.0.0.1:$port/healthz") || die "/healthz on 127.0.0.1:$port did not answer"
say "  controller pid $CTL_PID (uid $uid) leading; /healthz on 127.0.0.1:$port: $hz"

# ---- 6. admit --------------------------------------------------------------------------
step admit "a 2x4-GPU GPUJob admitted by the containerized controller"
cat <<'YAML' | kubectl apply -f - >>"$SCRATCH/apply.log" 2>&1 || die "kubectl apply of GPUJob research/image-test failed"
apiVersion: gangq.io/v1alpha1
kind: GPUJob
metadata: {name: image-test, namespace: research}
spec:
  class: Batch
  priorityClassName: gangq-batch-low
  replicas: 2
  gpu: {count: 4, types: [NVIDIA-A100-SXM4-40GB]}
  template:
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox
        resources: {requests: {cpu: "4", memory: 16Gi}}
YAML
state=""; bound=""
for _ in $(seq 1 120); do
  state=$(kubectl -n research get gpujob image-test -o jsonpath='{.status.state}' 2>/dev/null || true)
  bound=$(kubectl -n research get pods -l gangq.io/job=image-test \
    -o jsonpath='{range .items[*]}{.spec.nodeName}{"\n"}{end}' 2>/dev/null | grep -c . || true)
  case "$state" in Admitted|Running) [ "$bound" = 2 ] && break ;; Failed) break ;; esac
  sleep 0.25
done
case "$state" in Admitted|Running) ;; *)
  tail -20 "$LOG" >&2
  die "GPUJob research/image-test state '$state' after 30 s, expected Admitted or Running; message: $(kubectl -n research get gpujob image-test -o jsonpath='{.status.message}' 2>&1)" ;;
esac
[ "$bound" = 2 ] || die "GPUJob research/image-test is $state but $bound of 2 pods are bound to nodes"
nodes=$(kubectl -n research get pods -l gangq.io/job=image-test -o jsonpath='{range .items[*]}{.spec.nodeName}{" "}{end}')
agents=$(jq -r 'select(.verb == "create" and .objectRef.resource == "pods" and .objectRef.namespace == "research") | .userAgent' \
  "$ENV_DIR/audit.log" 2>/dev/null | sort -u | xargs)
case "$agents" in gangq*) ;; *) die "the job's pods were created by '$agents', expected the gangq controller" ;; esac
say "  GPUJob research/image-test $state; pods bound to: $nodes(created by user agent $agents)"
for _ in $(seq 1 80); do
  state=$(kubectl -n research get gpujob image-test -o jsonpath='{.status.state}' 2>/dev/null || true)
  [ "$state" = Running ] && break
  sleep 0.25
done
[ "$state" = Running ] || die "GPUJob research/image-test state '$state' 20 s after admission, expected Running (fake kubelet ran its pods)"
say "  GPUJob research/image-test Running"

# ---- 7. stop ---------------------------------------------------------------------------
step stop "SIGTERM to the controller"
kill -TERM "$CTL_PID" 2>/dev/null || die "could not signal pid $CTL_PID"
rc=""
for _ in $(seq 1 150); do
  if ! kill -0 "$RUN_PID" 2>/dev/null; then wait "$RUN_PID"; rc=$?; break; fi
  sleep 0.1
done
[ -n "$rc" ] || die "the controller did not exit within 15 s of SIGTERM"
RUN_PID=""; CTL_PID=""
[ "$rc" = 0 ] || { tail -10 "$LOG" "$SCRATCH/buildah-run.log" >&2; die "buildah run exited $rc after SIGTERM, expected 0"; }
grep -q 'controller stopped' "$LOG" || die "no 'controller stopped' in the controller log"
say "  controller stopped cleanly (exit 0)"

say "all steps done"
