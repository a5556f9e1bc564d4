#!/usr/bin/env bash
# Finds, or installs from Debian's packages, the headless Chromium that the browser tests drive
# (cmd/fleet-api's page, through chromedp). Prints the browser's path as its last line.
# It fails, saying why, when there is none and it cannot install one: the browser tests do not
# skip for want of a browser.
set -euo pipefail

find_browser() {
  for b in "${CHROMIUM:-}" chromium chromium-headless-shell chromium-browser google-chrome; do
    [ -n "$b" ] && command -v "$b" 2>/dev/null && return 0
  done
  return 1
}

if path="$(find_browser)"; then
  echo "$path"
  exit 0
fi
log() { echo "install-chromium: $*" >&2; }
if ! command -v apt-get >/dev/null 2>&1; then
  log "no Chromium on PATH and no apt-get to install Debian's package; install Chromium (or set CHROMIUM to its path)"
  exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    sudo="sudo -n"
  else
    log "no Chromium on PATH, and installing Debian's package needs root: run 'apt-get install chromium' as root (or set CHROMIUM to a browser's path)"
    exit 1
  fi
fi
log "installing Debian's chromium package (once; about a minute)"
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >&2 || { log "apt-get update failed"; exit 1; }
$sudo apt-get install -y -qq --no-install-recommends chromium fonts-liberation >&2 || { log "apt-get install chromium failed"; exit 1; }
if ! path="$(find_browser)"; then
  log "Debian's chromium package installed no chromium on PATH"
  exit 1
fi
echo "$path"
