# One image for the agent and the collector (and the offline CLI).
# Build stage: compile TypeScript and the libpcap addon (cap) against libpcap-dev.
FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpcap-dev g++ make python3 \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY agent agent
COPY collector collector
COPY common common
COPY cli cli
COPY proto proto
COPY lab lab
COPY scripts scripts
COPY test test
COPY bench bench
RUN npm run build && npm prune --omit=dev

# Runtime: libpcap, nsenter (util-linux) to capture inside pod network namespaces, conntrack.
FROM node:20-bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends libpcap0.8 util-linux iproute2 conntrack \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /app
COPY --from=build /src/package.json ./
COPY --from=build /src/node_modules node_modules
COPY --from=build /src/dist dist
COPY --from=build /src/proto proto
COPY bin bin
ENTRYPOINT ["node", "/app/bin/hoptrace"]
CMD ["help"]
