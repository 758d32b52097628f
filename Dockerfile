# One image for the agent and the collector (and the offline CLI): `hoptrace agent …`,
# `hoptrace collector …`. Not built in CI (no container engine there); see README "Kubernetes".
#
# Build stage: compile TypeScript, the cap addon (npm ci) and the optional native capture addon
# (native/pcap-batch) against libpcap-dev. scripts/build-native.sh exits 0 with a warning when the
# addon does not build; the agent then falls back to cap.
FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpcap-dev g++ make python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
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
FROM node:20-bookworm-slim
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
# Root by default because the agent runs as uid 0 (with only NET_RAW, NET_ADMIN, SYS_ADMIN and
# SYS_PTRACE: deploy/base/agent.yaml); the collector's manifest runs it as the image's unprivileged
# `node` user (uid 1000) with no capabilities. Both with a read-only root filesystem.
ENTRYPOINT ["node", "/app/bin/hoptrace"]
CMD ["help"]
