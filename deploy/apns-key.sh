#!/bin/bash
# Installs or replaces the APNs key (the Secret prefect-push-apns) only after `prefect-push check` has accepted it:
#
#   usage: KUBECTL="kubectl --namespace prefect" deploy/apns-key.sh KEYFILE KEY_ID TEAM_ID
#
# 1. The candidate: the Secret prefect-push-apns-candidate, built with --dry-run=client -o yaml and applied.
# 2. The check Job (deploy/check-job.sh) through OVERLAY (default .build/k8s-apns-key): deploy/k8s with the check/
#    and check/candidate Components, so the Job mounts and reads the candidate exactly as the relay would read
#    prefect-push-apns, with the image the running Deployment runs (or IMAGE_REF, e.g. the one `make push` pushed,
#    when no relay runs yet) and this checkout's prefect-push.env. It tries the key against both APNs hosts.
# 3. Passed: prefect-push-apns replaced by the same key, the candidate deleted, the relay restarted (it reads its
#    key once, at start) and its rollout waited for (ROLLOUT_TIMEOUT). Failed: its failed lines, the candidate
#    deleted, exit 1; prefect-push-apns and the running relay are left as they were.
# With no relay running and no IMAGE_REF there is nothing to check the key with: the Secret is stored as given, and
# `make deploy` checks it in its own check Job before the first relay starts.
set -euo pipefail
key=${1:-} key_id=${2:-} team_id=${3:-}
usage="usage: make apns-key KEY=AuthKey_XXXXXXXXXX.p8 KEY_ID=XXXXXXXXXX TEAM_ID=YYYYYYYYYY"
[ -n "$key" ] && [ -n "$key_id" ] && [ -n "$team_id" ] || { echo "$usage"; exit 2; }
[ -r "$key" ] || { echo "cannot read $key"; exit 2; }
kubectl=${KUBECTL:-kubectl}
overlay=${OVERLAY:-.build/k8s-apns-key}
namespace=${NAMESPACE:-prefect}
candidate=prefect-push-apns-candidate

# The Secret `name` holding the key file as AuthKey.p8 (the name the Deployment mounts) and its ids, applied.
store() {
  $kubectl create secret generic "$1" --dry-run=client -o yaml --from-file=AuthKey.p8="$key" \
    --from-literal=APNS_KEY_ID="$key_id" --from-literal=APNS_TEAM_ID="$team_id" | $kubectl apply -f -
}

running=""
if $kubectl get deployment/prefect-push >/dev/null 2>&1; then
  running=yes
  image=$($kubectl get deployment/prefect-push -o jsonpath='{.spec.template.spec.containers[?(@.name=="prefect-push")].image}')
else
  image=${IMAGE_REF:-}
fi
if [ -z "$image" ]; then
  echo "no relay runs and no image to check the key with: storing it unchecked; make deploy checks it before the relay starts"
  store prefect-push-apns
  exit 0
fi

echo "==> checking the key as $candidate, with $image"
trap '$kubectl delete secret "$candidate" --ignore-not-found >/dev/null' EXIT
store "$candidate"
mkdir -p "$overlay"
printf '%s\n' 'apiVersion: kustomize.config.k8s.io/v1beta1' 'kind: Kustomization' "namespace: $namespace" \
  'resources: [../../deploy/k8s]' 'components: [../../deploy/k8s/check, ../../deploy/k8s/check/candidate]' \
  'images:' '- name: prefect-push' "  newName: $image" > "$overlay/kustomization.yaml"
if ! deploy/check-job.sh "$overlay" "${CHECK_JOB_SECONDS:-180}"; then
  echo "the key was not installed: prefect-push-apns and the running relay are as they were; fix what the failed lines name"
  exit 1
fi

echo "==> installing the key as prefect-push-apns"
store prefect-push-apns
if [ -n "$running" ]; then
  $kubectl rollout restart deployment/prefect-push
  $kubectl rollout status deployment/prefect-push --timeout="${ROLLOUT_TIMEOUT:-330s}"
fi
