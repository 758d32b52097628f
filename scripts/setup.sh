#!/usr/bin/env bash
# Installs what hoptrace needs on a fresh Debian machine with Node 20, and nothing that is present:
# system packages for capture and the namespace lab, then the npm dependencies.
set -euo pipefail
cd "$(dirname "$0")/.."

# command -> Debian package
declare -A NEED_CMD=(
  [ip]=iproute2
  [iptables]=iptables
  [nft]=nftables
  [conntrack]=conntrack
  [tcpdump]=tcpdump
  [socat]=socat
  [curl]=curl
  [ping]=iputils-ping
  [nsenter]=util-linux
  [setpriv]=util-linux
  [openssl]=openssl
  [tshark]=tshark
  [chromium]=chromium
  # test/unit/global-install.test.ts and kubectl-plugin.test.ts run Debian's kubectl.
  [kubectl]=kubernetes-client
)
missing=()
for cmd in "${!NEED_CMD[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED_CMD[$cmd]}")
done
# Headers for building the libpcap addons (cap) with node-gyp.
[ -e /usr/include/pcap/pcap.h ] || missing+=(libpcap-dev)
# Chromium renders the web view's test screenshots with a real font.
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || missing+=(fonts-dejavu-core)
# node-gyp needs a compiler and python3.
command -v g++ >/dev/null 2>&1 || missing+=(g++)
command -v make >/dev/null 2>&1 || missing+=(make)
command -v python3 >/dev/null 2>&1 || missing+=(python3)

if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "LAB_PREREQUISITE: missing system packages: ${missing[*]} (run as root, or: sudo apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  echo "setup: installing system packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# npm dependencies: install when absent or older than the lock file. A node_modules that is a
# symlink is someone else's install (a worktree sharing its checkout's): `npm ci` would empty it
# under everyone using it, so it is left alone with a word.
if [ -L node_modules ]; then
  echo "setup: node_modules is a symlink to $(readlink node_modules); not reinstalling a shared install" >&2
elif [ ! -e node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "setup: installing npm dependencies (npm ci)" >&2
  npm ci --no-audit --no-fund >&2
fi

# The native capture addon: build when absent or older than its sources (never fails the setup).
addon=native/pcap-batch/build/Release/pcap_batch.node
if [ ! -e "$addon" ] || [ -n "$(find native/pcap-batch/src native/pcap-batch/binding.gyp -newer "$addon" 2>/dev/null)" ]; then
  echo "setup: building the native capture addon (native/pcap-batch)" >&2
  bash scripts/build-native.sh
fi
