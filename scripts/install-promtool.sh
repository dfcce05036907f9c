#!/usr/bin/env bash
# promtool and prometheus, for the tests that check the rendered PrometheusRule's groups
# (tests/operator/render/test_monitoring.py: `promtool check rules`) and those that run a
# Prometheus scraping the pods the autoscaler reads (tools/disagg_tools/local/prometheus.py):
# Debian's prometheus package ships both (2.42 on bookworm), installed with apt-get when
# missing. No service is started: the tests start their own process.
set -euo pipefail
command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1 && exit 0
if [ "$(id -u)" != 0 ]; then
    echo "install-promtool: promtool or prometheus is missing; apt-get install prometheus (or run as root)" >&2
    exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get install -y -q prometheus >/dev/null 2>&1 \
    || { apt-get update -q >/dev/null && apt-get install -y -q prometheus >/dev/null; }
echo "installed $(promtool --version 2>&1 | head -1)"
