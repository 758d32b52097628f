# One image for the agent and the collector (and the offline CLI): `hoptrace agent …`,
# `hoptrace collector …`. Build with `bash scripts/image.sh` (docker or podman; it then checks the
# image from inside). It needs no network beyond the Debian and npm registries: node-gyp builds the
# addons against the headers the base image ships, never ones it downloads.
#
# Build stage: compile TypeScript, the cap addon (npm ci) and the optional native capture addon
# (native/pcap-batch) against libpcap-dev. scripts/build-native.sh exits 0 with a warning when the
# addon does not build; the agent then falls back to cap.
FROM node:20-bookworm-slim AS build
# node:20 images unpack Node's release tarball into /usr/local, headers included
# (/usr/local/include/node/node_api.h); node-gyp reads <nodedir>/include/node. Without this it
# downloads the headers from nodejs.org, which an offline build cannot reach.
ENV npm_config_nodedir=/usr/local
RUN test -f /usr/local/include/node/node_api.h \
 || { echo "Dockerfile: the base image has no /usr/local/include/node (node-gyp would download headers)" >&2; exit 1; }
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpcap-dev g++ make python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
# A registry reached through a TLS-inspecting proxy needs its CA: scripts/image.sh passes the file
# named by the host's NODE_EXTRA_CA_CERTS as the build secret `ca` (never a layer of the image).
RUN --mount=type=secret,id=ca \
    if [ -s /run/secrets/ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/ca; fi \
 && npm ci --no-audit --no-fund
# Everything tsconfig.json includes (tests, lab and bench compile with the rest).
COPY tsconfig.json ./
COPY core core
COPY common common
COPY offline offline
COPY agent agent
COPY collector collector
COPY cli cli
COPY proto proto
COPY lab lab
COPY scripts scripts
COPY test test
COPY bench bench
COPY native native
RUN npm run build \
 && npm run build:native \
 && mkdir -p native/pcap-batch/build/Release \
 && npm prune --omit=dev

# Runtime: libpcap for capture, nsenter (util-linux) to enter pod network namespaces, iproute2
# (`ip -j addr` inside namespaces), conntrack and iptables for the evidence and doctor checks.
# No compiler, make or python: the addons were built above.
FROM node:20-bookworm-slim AS runtime
ARG VERSION=0.0.0-unknown
LABEL org.opencontainers.image.title="hoptrace" \
      org.opencontainers.image.description="Find which layer rewrote a VPN client's source address inside a Kubernetes cluster, with packet evidence." \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT"
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpcap0.8 util-linux iproute2 conntrack iptables nftables \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist dist
COPY --from=build /src/proto proto
# Empty when the native addon did not build (the agent uses cap then).
COPY --from=build /src/native/pcap-batch/build/Release native/pcap-batch/build/Release
COPY bin bin
# Non-root by default: the collector and the offline CLI need nothing else, and the collector's
# manifest also says runAsUser 1000 / runAsNonRoot (numeric here, so the kubelet can verify it).
# The agent, which needs uid 0 (it owns the namespace files and /proc/sys/net it opens), asks for
# it explicitly: runAsUser: 0 in deploy/base/agent.yaml, with four capabilities only.
USER 1000:1000
ENTRYPOINT ["node", "/app/bin/hoptrace"]
CMD ["help"]
