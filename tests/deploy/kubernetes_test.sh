#!/usr/bin/env bash
# deploy/kubernetes: every overlay renders offline (`kubectl kustomize`) and every object
# it renders validates against the Kubernetes and Prometheus Operator schemas
# (validate_manifests.mjs, npm packages from `npm install` here: scripts/test.sh does it).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$here/../.."
if ! command -v kubectl >/dev/null 2>&1; then
  echo "SKIPPED: kubectl not found (Debian's kubernetes-client, or the Kubernetes project's kubectl)"
  exit 0
fi
if [ ! -d "$here/node_modules/kubernetes-models" ]; then
  echo "SKIPPED: tests/deploy/node_modules is missing; run 'npm install' in tests/deploy (scripts/test.sh does)"
  exit 0
fi
out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
status=0
for overlay in "$root"/deploy/kubernetes/overlays/*/; do
  name="$(basename "$overlay")"
  if ! kubectl kustomize "$overlay" >"$out/$name.yaml" 2>"$out/$name.err"; then
    echo "overlay $name does not render:"
    grep -v "Warning: '" "$out/$name.err" || true
    status=1
    continue
  fi
  node "$here/validate_manifests.mjs" "$out/$name.yaml" || status=1
done
exit "$status"
