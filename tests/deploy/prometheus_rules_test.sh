#!/usr/bin/env bash
# deploy/prometheus: the rules and the scrape config load (promtool check), every alert
# fires and stays quiet where its unit tests say (promtool test rules), and no alert is
# without a test case. promtool comes from Debian's `prometheus` (scripts/install_deps.sh).
set -euo pipefail
cd "$(dirname "$0")/../../deploy/prometheus"
if ! command -v promtool >/dev/null 2>&1; then
  echo "SKIPPED: promtool not found; install Debian's prometheus (scripts/install_deps.sh)"
  exit 0
fi
promtool check rules rules/*.yml
promtool check config prometheus.yml
promtool test rules tests/*.yml
missing=0
for alert in $(sed -n 's/^ *- alert: *\([A-Za-z0-9_]*\).*/\1/p' rules/*.yml); do
  if ! grep -q "alertname: *$alert\b" tests/*.yml; then
    echo "alert $alert has no case in deploy/prometheus/tests"
    missing=1
  fi
done
exit "$missing"
