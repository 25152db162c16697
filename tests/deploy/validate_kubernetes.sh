#!/usr/bin/env bash
# deploy/kubernetes/*.yaml against the Kubernetes API schemas, offline:
# installs the pinned npm packages (kubernetes-models, yaml, typescript)
# into BUILD_DIR, then runs validate_kubernetes.mjs over the manifests,
# then over broken copies of them, which it must refuse (a misspelt field,
# a wrong type, a missing required field): a check that cannot fail is no
# check. Exit 77 (skipped) when node or npm is missing or the registry
# cannot be reached.
#   validate_kubernetes.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=${1:?source dir} work=${2:?build dir}
here=$src/tests/deploy
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "skipped: node or npm is not installed"
  exit 77
fi
mkdir -p "$work"
cp "$here/package.json" "$here/package-lock.json" "$here/validate_kubernetes.mjs" "$work/"
cd "$work"
if ! grep -q '"version": "5.1.0"' node_modules/kubernetes-models/package.json 2>/dev/null ||
   ! [ -d node_modules/typescript ]; then
  if ! out=$(timeout 300 npm ci --no-audit --no-fund --prefer-offline \
      --fetch-retries=1 --fetch-timeout=20000 --loglevel=error 2>&1); then
    echo "skipped: npm ci failed (registry unreachable?): $out"
    exit 77
  fi
fi
node validate_kubernetes.mjs "$work" "$src"/deploy/kubernetes/*.yaml

# Each broken copy must be refused, naming what is wrong.
refuses() { # NAME SED-EXPR WHAT
  sed "$2" "$src/deploy/kubernetes/daemonset.yaml" >"$work/broken-$1.yaml"
  cmp -s "$work/broken-$1.yaml" "$src/deploy/kubernetes/daemonset.yaml" &&
    { echo "FAILED: the edit '$2' changed nothing"; exit 1; }
  if out=$(node validate_kubernetes.mjs "$work" "$work/broken-$1.yaml"); then
    echo "FAILED: broken-$1 ($3) was accepted:"; echo "$out"; exit 1
  fi
  echo "refused as it should: $3: $(echo "$out" | grep -v ' ok$' | head -1)"
}
refuses field 's/periodSeconds: 1$/periodSecnds: 1/' "a misspelt field"
refuses type 's/containerPort: 8080/containerPort: "eighty"/' "a string for an integer"
refuses required 's/^\(\s*\)- name: sidecar$/\1- nam: sidecar/' "a container without its name"
echo "1 passed, 0 failed"
