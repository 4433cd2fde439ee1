#!/usr/bin/env bash
# Debian's Chromium and ChromeDriver for the browser test (never a browser download).
# Usage: scripts/browser.sh install
set -euo pipefail
case "${1:-install}" in
  install)
    if [ ! -x /usr/bin/chromium ]; then
      echo "installing Chromium (Debian packages chromium, chromium-driver)..." >&2
      export DEBIAN_FRONTEND=noninteractive
      apt-get update -qq >/dev/null && apt-get install -y -qq chromium chromium-driver >/dev/null
    fi
    ;;
  *) echo "usage: $0 install" >&2; exit 2 ;;
esac
