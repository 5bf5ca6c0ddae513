# syntax=docker/dockerfile:1
# The meter sidecar daemon: `docker build -t meter .`, or `docker compose up` (README, "Docker").
# The base image, pinned by version and digest (bump both together).
FROM node:20.20.2-bookworm-slim@sha256:2cf067cfed83d5ea958367df9f966191a942351a2df77d6f0193e162b5febfc0 AS node

# Build: every dependency and the TypeScript compiler; only dist/ leaves this stage.
FROM node AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY cli ./cli
COPY bench ./bench
COPY sql ./sql
# npm ci runs the package's prepare script: tsc -p tsconfig.json → dist/ (bench too; not shipped),
# then the embedded store's template (dist/embedded-template)
RUN npm ci --no-audit --no-fund

# Runtime dependencies only: no dev dependencies, no compiler (scripts skipped: prepare needs tsc).
FROM node AS deps
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force

FROM node
WORKDIR /app
ENV NODE_ENV=production METER_HOST=0.0.0.0 METER_PORT=8787 METER_DATA_DIR=/data
COPY --from=deps /app/node_modules ./node_modules
COPY --from=build /app/dist/src ./dist/src
COPY --from=build /app/dist/cli ./dist/cli
# A new embedded store (a fresh /data) starts from this pre-built database instead of initdb.
COPY --from=build /app/dist/embedded-template ./dist/embedded-template
COPY package.json ./
COPY sql ./sql
# The spend page's files (GET /ui), read from the package root like sql/.
COPY ui ./ui
# /data is owned by node before it becomes a volume: a fresh named volume takes this owner, so
# the daemon (USER node) can write meter.lock, spool/ and the embedded store there.
# `meter` on the PATH: `docker compose exec meter meter keys create …`.
RUN mkdir -p /data && chown node:node /data \
 && chmod 755 dist/cli/main.js && ln -s /app/dist/cli/main.js /usr/local/bin/meter
VOLUME /data
USER node
EXPOSE 8787
# Ready = the store answers (/readyz); the start period covers waiting for the database and migrations.
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s --retries=3 \
  CMD ["node", "-e", "fetch('http://127.0.0.1:'+(process.env.METER_PORT||8787)+'/readyz').then(r=>process.exit(r.ok?0:1),()=>process.exit(1))"]
# Exec form: node is PID 1 and receives docker stop's SIGTERM itself (meter drains, then exits 0).
STOPSIGNAL SIGTERM
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["start"]
