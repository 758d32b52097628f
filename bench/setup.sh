#!/usr/bin/env bash
# What `npm run bench` needs beyond the project's own setup (scripts/setup.sh: tcpdump, iproute2,
# iptables, libpcap-dev, the npm dependencies and the native addon): tshark for the file comparison,
# GNU time for peak RSS, a C compiler for the flood generator. Installs what is missing as root, or
# fails naming it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh

declare -A NEED_CMD=([tshark]=tshark [cc]=gcc [taskset]=util-linux)
missing=()
for cmd in "${!NEED_CMD[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED_CMD[$cmd]}")
done
[ -x /usr/bin/time ] || missing+=(time)
if [ "${#missing[@]}" -gt 0 ]; then
  if [ "$(id -u)" -ne 0 ]; then
    echo "bench: missing system packages: ${missing[*]} (run as root, or: sudo apt-get install -y ${missing[*]})" >&2
    exit 1
  fi
  echo "bench: installing system packages: ${missing[*]}" >&2
  export DEBIAN_FRONTEND=noninteractive
  # tshark asks whether non-root users may capture; answer no (the benchmark only reads files).
  echo "wireshark-common wireshark-common/install-setuid boolean false" | debconf-set-selections 2>/dev/null || true
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ ! -e native/pcap-batch/build/Release/pcap_batch.node ]; then
  echo "bench: the native capture addon is not built (npm run build:native); the capture section will fail for it" >&2
fi
