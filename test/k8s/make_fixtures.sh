#!/bin/bash
# Regenerates test/k8s/fixtures/*.json: Pod, batch/v1 Job and batch/v1beta1 CronJob objects as
# Debian 12's kubectl (kubernetes-client 1.20.2) writes them offline, the way
# /work/shared/reference/kubernetes/NOTES.md section 1 describes (no API server: the typed
# generators, `set resources --local`, and a seeded discovery cache for `kubectl run`).
#   bash test/k8s/make_fixtures.sh [KUBECTL]
# Without KUBECTL it runs `apt-get download kubernetes-client` into a temporary folder.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$here/fixtures
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
K=${1:-}
if [[ -z $K ]]; then
  (cd "$work" && apt-get download kubernetes-client >/dev/null && dpkg-deb -x kubernetes-client_*.deb root)
  K=$work/root/usr/bin/kubectl
fi
export HOME=$work/home KUBECONFIG=/dev/null
# `kubectl run` needs API discovery: a cache that says the core group serves pods.
D=$HOME/.kube/cache/discovery/localhost_8080
mkdir -p "$D/v1"
echo '{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"","versions":[{"groupVersion":"v1","version":"v1"}],"preferredVersion":{"groupVersion":"v1","version":"v1"}}]}' >"$D/servergroups.json"
echo '{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"v1","resources":[{"name":"pods","singularName":"","namespaced":true,"kind":"Pod","verbs":["create","get","list"],"shortNames":["po"]}]}' >"$D/v1/serverresources.json"

# Every kubectl flag before `--` (after it they become the container's args).
$K -n ml create job train --image=ghcr.io/lab/train:v2 --dry-run=client -o json \
  -- python train.py --epochs 10 >"$work/job.json"
$K set resources --local -f "$work/job.json" --requests=cpu=4,memory=32Gi \
  --limits=cpu=8,memory=64Gi -o json >"$out/job.json"

$K -n ml create cronjob nightly --image=ghcr.io/lab/etl:2024.1 '--schedule=0 2 * * *' \
  --dry-run=client -o json -- python etl.py --full >"$work/cronjob.json"
$K set resources --local -f "$work/cronjob.json" --requests=cpu=2,memory=16Gi \
  --limits=memory=16Gi -o json >"$out/cronjob.json"

$K -n ml run infer --image=ghcr.io/lab/serve:1.4 --labels=app=infer --dry-run=client -o json \
  --command -- python serve.py --port 8000 >"$work/pod.json"
$K set resources --local -f "$work/pod.json" --requests=cpu=1,memory=8Gi --limits=memory=8Gi \
  -o json >"$out/pod.json"
echo "wrote $out/{job,cronjob,pod}.json with $($K version --client --short 2>/dev/null || true)"
