# niclab: one image for every role (`api`, `agent`, `coordinator`, `start`, and the scripting
# commands). The API runs as the unprivileged user `node`; an agent needs `--user root` with
# NET_ADMIN and NET_RAW (see deploy/compose.yaml), never --privileged.

FROM node:20-bookworm-slim AS build
WORKDIR /src
# Manifests first: the dependency layer is rebuilt only when they change.
COPY package.json package-lock.json tsconfig.base.json ./
COPY services/shared/package.json services/shared/
COPY services/agent/package.json services/agent/
COPY services/coordinator/package.json services/coordinator/
COPY services/api/package.json services/api/
COPY services/cli/package.json services/cli/
COPY services/client/package.json services/client/
RUN npm ci --no-audit --no-fund
COPY openapi.yaml ./
COPY services services
RUN npm run build \
 && npm prune --omit=dev --no-audit --no-fund \
 && find services -name '*.tsbuildinfo' -delete

FROM node:20-bookworm-slim
ARG VERSION=0.1.0
LABEL org.opencontainers.image.title="niclab" \
      org.opencontainers.image.description="A lab service for benchmarking network interfaces: REST API, BullMQ queue, agents on lab hosts" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.licenses="MIT" \
      org.opencontainers.image.source="https://github.com/niclab/niclab"
# The tools an agent runs or reads: iperf3 (engine), iproute2 (ss, ip), ethtool (driver, firmware),
# ping (a run's MTU proven before it measures), chattr (an iperf3 sink made synchronous).
RUN apt-get update \
 && apt-get install -y --no-install-recommends iperf3 iproute2 ethtool util-linux iputils-ping e2fsprogs ca-certificates \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/niclab
COPY --from=build /src/package.json /src/openapi.yaml ./
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/services/shared/package.json services/shared/
COPY --from=build /src/services/shared/dist services/shared/dist
COPY --from=build /src/services/agent/package.json services/agent/
COPY --from=build /src/services/agent/dist services/agent/dist
COPY --from=build /src/services/coordinator/package.json services/coordinator/
COPY --from=build /src/services/coordinator/dist services/coordinator/dist
COPY --from=build /src/services/api/package.json services/api/
COPY --from=build /src/services/api/dist services/api/dist
COPY --from=build /src/services/api/ui/static services/api/ui/static
COPY --from=build /src/services/cli/package.json services/cli/
COPY --from=build /src/services/cli/dist services/cli/dist
COPY --from=build /src/services/client/package.json services/client/
COPY --from=build /src/services/client/dist services/client/dist
RUN mkdir -p /var/lib/niclab && chown node:node /var/lib/niclab \
 && ln -s /opt/niclab/services/cli/dist/main.js /usr/local/bin/niclab && chmod +x services/cli/dist/main.js
ENV NODE_ENV=production \
    NICLAB_HOST=0.0.0.0 \
    NICLAB_DATA_DIR=/var/lib/niclab
USER node
EXPOSE 8080
# The API's liveness; an agent has no HTTP port, so deployments turn this off for agents.
HEALTHCHECK --interval=15s --timeout=3s --start-period=20s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.NICLAB_PORT||8080)+'/healthz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
ENTRYPOINT ["node", "/opt/niclab/services/cli/dist/main.js"]
CMD ["api"]
