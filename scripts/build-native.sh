#!/usr/bin/env bash
# Builds the libpcap capture addon (native/pcap-batch) with node-gyp against the system libpcap.
# Optional by design: on failure it prints one warning and exits 0, and the agent falls back to
# cap 0.2.1 (drops unknown, ~40 k pps ceiling). Needs libpcap-dev, g++, make, python3.
set -uo pipefail
cd "$(dirname "$0")/../native/pcap-batch" || exit 0
log="$(mktemp)"
# npm run sets npm_config_node_gyp to the node-gyp bundled with npm; else the project's or npx's.
gyp() {
  if [ -n "${npm_config_node_gyp:-}" ] && [ -e "$npm_config_node_gyp" ]; then
    node "$npm_config_node_gyp" "$@"
  else
    npx --yes node-gyp "$@"
  fi
}
if gyp rebuild >"$log" 2>&1; then
  echo "build-native: built native/pcap-batch/build/Release/pcap_batch.node" >&2
else
  echo "build-native: WARNING: the native capture addon did not build; live capture will use cap 0.2.1 (drops unknown, ~40 k pps ceiling)." >&2
  [ -e /usr/include/pcap/pcap.h ] || echo "build-native: /usr/include/pcap/pcap.h is missing: apt-get install libpcap-dev" >&2
  grep -E "error|Error|ERR!" "$log" | head -n 5 | sed 's/^/build-native:   /' >&2
fi
rm -f "$log"
exit 0
