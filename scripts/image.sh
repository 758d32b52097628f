#!/usr/bin/env bash
# Builds the hoptrace image (Dockerfile) with docker when a daemon answers, else with podman, then
# checks it from inside: the CLI starts and prints the package's version, the cap addon and the
# native capture addon (native/pcap-batch) load, the runtime stage has no compiler, make or python,
# it runs as uid 1000 by default and carries the OCI version label.
#
#   bash scripts/image.sh [--tag NAME:TAG] [--engine docker|podman]
#
# Exit codes: 0 built and every check passed; 1 the build failed; 4 a check failed;
# 5 no usable container engine (nothing was built: this is not a pass); 2 usage.
# Podman runs with runc and cgroupfs (Debian's podman 4.3 with crun cannot set rlimits on some VMs)
# and the ulimits below; HOPTRACE_PODMAN_RUNTIME overrides the runtime. HOPTRACE_BUILD_CA (default:
# $NODE_EXTRA_CA_CERTS) is a CA file npm ci trusts inside the build, passed as a build secret.
set -uo pipefail
cd "$(dirname "$0")/.."

version="$(node -p "require('./package.json').version" 2>/dev/null || sed -n 's/^  "version": "\(.*\)",$/\1/p' package.json)"
tag="hoptrace:${version}"
engine=""
while [ $# -gt 0 ]; do
  case "$1" in
    --tag) tag="${2:?--tag needs NAME:TAG}"; shift 2 ;;
    --engine) engine="${2:?--engine needs docker or podman}"; shift 2 ;;
    -h | --help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "image: unknown argument $1" >&2; exit 2 ;;
  esac
done

docker_usable() { command -v docker >/dev/null 2>&1 && docker info >/dev/null 2>&1; }
podman_usable() { command -v podman >/dev/null 2>&1 && podman info >/dev/null 2>&1; }
if [ -z "$engine" ]; then
  if docker_usable; then engine=docker; elif podman_usable; then engine=podman; fi
fi
case "$engine" in
  docker) docker_usable || { echo "image: NO_ENGINE: docker does not answer (docker info failed)" >&2; exit 5; } ;;
  podman) podman_usable || { echo "image: NO_ENGINE: podman is missing or does not work (podman info failed)" >&2; exit 5; } ;;
  "")
    echo "image: NO_ENGINE: no usable container engine (no docker daemon answers, no working podman); nothing was built or checked" >&2
    exit 5
    ;;
  *) echo "image: --engine must be docker or podman" >&2; exit 2 ;;
esac

# One command line per engine: podman's global flags go before the subcommand.
eng=("$engine")
build_flags=()
run_flags=(--rm)
if [ "$engine" = podman ]; then
  runtime="${HOPTRACE_PODMAN_RUNTIME:-runc}"
  eng+=(--runtime "$runtime" --cgroup-manager=cgroupfs)
  build_flags+=(--ulimit nproc=1024:1024 --ulimit nofile=1024:1024)
  run_flags+=(--ulimit nproc=1024:1024 --ulimit nofile=1024:1024)
fi

# The registry's CA when the host reaches it through a TLS-inspecting proxy (Dockerfile: secret ca).
ca="${HOPTRACE_BUILD_CA:-${NODE_EXTRA_CA_CERTS:-}}"
if [ -n "$ca" ] && [ -r "$ca" ]; then
  build_flags+=(--secret "id=ca,src=$ca")
  echo "image: passing $ca to npm ci as the build secret ca" >&2
fi

echo "image: building $tag with $engine (version $version)" >&2
start=$(date +%s)
if ! "${eng[@]}" build "${build_flags[@]}" --build-arg "VERSION=$version" -t "$tag" .; then
  echo "image: BUILD_FAILED: $engine build failed after $(($(date +%s) - start)) s" >&2
  exit 1
fi
echo "image: built $tag in $(($(date +%s) - start)) s" >&2

failed=0
check() { # name, then the command to run inside the image (as its default user)
  local name="$1"; shift
  local out
  if out="$("${eng[@]}" run "${run_flags[@]}" --entrypoint "$1" "$tag" "${@:2}" 2>&1)"; then
    echo "image: ok   $name: $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-120)" >&2
  else
    echo "image: FAIL $name: $(printf '%s' "$out" | tr '\n' ' ' | cut -c1-300)" >&2
    failed=1
  fi
}
check "CLI version" sh -c "v=\$(node /app/dist/cli/main.js --version) && echo \"\$v\" && case \"\$v\" in *'$version'*) ;; *) exit 1 ;; esac"
check "kubectl plugin help" node /app/bin/kubectl-hoptrace --help
check "cap addon loads" node -e "const c=require('/app/node_modules/cap'); console.log('cap', typeof c.Cap, c.Cap.deviceList().length, 'devices')"
check "native addon loads" node -e "const a=require('/app/native/pcap-batch/build/Release/pcap_batch.node'); console.log('pcap_batch', Object.keys(a).join(','))"
check "no compiler in runtime" sh -c 'for c in g++ gcc cc c++ make python3; do if command -v "$c"; then echo "found $c"; exit 1; fi; done; echo none of g++ gcc cc c++ make python3'
check "default user uid 1000" sh -c 'u=$(id -u); echo "uid $u"; [ "$u" = 1000 ]'
check "agent tools present" sh -c 'for c in nsenter ip conntrack iptables nft; do command -v "$c" >/dev/null || { echo "missing $c"; exit 1; }; done; echo nsenter ip conntrack iptables nft'

label="$("${eng[@]}" image inspect --format '{{ index .Config.Labels "org.opencontainers.image.version" }}' "$tag" 2>&1)"
if [ "$label" = "$version" ]; then
  echo "image: ok   label org.opencontainers.image.version=$label" >&2
else
  echo "image: FAIL label org.opencontainers.image.version is '$label', not '$version'" >&2
  failed=1
fi
size="$("${eng[@]}" image inspect --format '{{.Size}}' "$tag" 2>/dev/null || echo '?')"
echo "image: $tag size ${size} bytes" >&2
if [ "$failed" -ne 0 ]; then
  echo "image: CHECK_FAILED: the image built but a check above failed" >&2
  exit 4
fi
echo "image: $tag built and checked with $engine" >&2
