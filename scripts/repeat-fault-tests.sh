#!/usr/bin/env bash
# Runs the fault cases that depend on timing (state and lease writes cut or left unanswered over
# SFTP and S3, beside the deterministic local fault suite) many times in a row, on each Node line
# given, to show that a window is closed rather than merely unlikely. Not part of `pnpm test`.
#
#   scripts/repeat-fault-tests.sh [repeats] [node major ...]
#   scripts/repeat-fault-tests.sh 200 20 22 24
#
# Node lines other than the machine's are installed from the npm registry's `node` package into
# a temp directory. Needs what `.ci/run` installs (sshd, radosgw). Exits non-zero at the first
# line with a failure.
set -euo pipefail
cd "$(dirname "$0")/.."
repeats="${1:-200}"
shift || true
majors=("$@")
[ "${#majors[@]}" -gt 0 ] || majors=("$(node -p 'process.versions.node.split(".")[0]')")

suites=(
  packages/e2e/test/ssh/publish-faults.test.ts
  packages/e2e/test/s3/publish-faults.test.ts
)
# The cases whose outcome hangs on timing: every state write the proxies cut or leave unanswered.
filter="compare-and-swap|state write"

for major in "${majors[@]}"; do
  path="$PATH"
  if [ "$major" != "$(node -p 'process.versions.node.split(".")[0]')" ]; then
    prefix="$(mktemp -d)"
    npm install --prefix "$prefix" --no-audit --no-fund --no-save "node@${major}" >/dev/null
    path="${prefix}/node_modules/.bin:${PATH}"
  fi
  started=$SECONDS
  echo "node ${major}: ${repeats} runs of each state-write fault case"
  PATH="$path" DISTRIBUTOR_FAULT_REPEATS="$repeats" pnpm exec vitest run "${suites[@]}" \
    -t "$filter" --reporter=dot
  echo "node ${major}: passed (${repeats} runs each, $((SECONDS - started))s)"
done
