# The meter sidecar daemon. Build: docker build -t meter .
FROM node:20-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json tsconfig.json ./
COPY src ./src
COPY cli ./cli
RUN npm ci && npm prune --omit=dev

FROM node:20-bookworm-slim
WORKDIR /app
ENV NODE_ENV=production METER_HOST=0.0.0.0 METER_DATA_DIR=/data
COPY --from=build /app/node_modules ./node_modules
COPY --from=build /app/dist ./dist
COPY package.json ./
COPY sql ./sql
VOLUME /data
EXPOSE 8787
USER node
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["start"]
