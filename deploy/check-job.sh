#!/bin/bash
# Runs the pre-rollout check Job (deploy/k8s/check) from a kustomize overlay and says whether it passed:
#
#   usage: KUBECTL="kubectl --namespace prefect" deploy/check-job.sh OVERLAY [SECONDS]
#
# Deletes the last Job (a Job's pod template can't change), applies OVERLAY (which must render deploy/k8s with the
# check/ Component: a ConfigMap, the volume claim and the Job, never the Deployment), polls the Job every
# CHECK_JOB_POLL seconds (default 2) for up to SECONDS (default 180; its own deadline is 120 s), prints its log, and
# exits 0 when it succeeded, 1 when it failed or didn't finish (then with the log's `failed` lines again, last).
# `make check-job` and `make apns-key` (deploy/apns-key.sh) run it.
set -euo pipefail
overlay=${1:?usage: check-job.sh OVERLAY [SECONDS]}
seconds=${2:-180}
poll=${CHECK_JOB_POLL:-2}
kubectl=${KUBECTL:-kubectl}

$kubectl delete job prefect-push-check --ignore-not-found --wait=true
$kubectl apply -k "$overlay"
state=""
deadline=$(( $(date +%s) + seconds ))
while :; do
  state=$($kubectl get job prefect-push-check -o jsonpath='{.status.succeeded}/{.status.failed}')
  case $state in 1/*|*/1) break ;; esac
  [ "$(date +%s)" -lt "$deadline" ] || break
  sleep "$poll"
done
log=$($kubectl logs job/prefect-push-check --tail=100 2>&1) || true
printf '%s\n' "$log"
case $state in
  1/*) echo "check Job passed"; exit 0 ;;
  */1) echo "check Job failed; its failed lines:"
       printf '%s\n' "$log" | grep -E '^failed ' || echo "(none in the log: kubectl describe job prefect-push-check)"
       exit 1 ;;
  *) echo "check Job unfinished after $seconds s (pod not scheduled? $kubectl describe job prefect-push-check)"
     exit 1 ;;
esac
