# syntax=docker/dockerfile:1.7
# Build: docker build -t lead-capture .
# Run:   docker run -p 3000:3000 -e DATABASE_URL=... -e REDIS_URL=... lead-capture
ARG BUN_IMAGE=oven/bun:1.4.5-debian

FROM ${BUN_IMAGE} AS dependencies
WORKDIR /app
COPY package.json bun.lock ./
# package.json's patchedDependencies: bun install applies them (patches/README.md)
COPY patches ./patches
RUN bun install --frozen-lockfile --production --ignore-scripts

FROM ${BUN_IMAGE} AS runtime
WORKDIR /app
ENV NODE_ENV=production \
    PORT=3000 \
    HOST=0.0.0.0 \
    DATA_DIR=/app/.data
# JavaScriptCore sizes its heap growth to the RAM it sees: the host's, not the container's limit. On
# a 24 GiB host a replica under load peaked at 205-232 MB RSS; told it has 512 MiB it collects
# sooner and peaked at 160-170 MB at the same throughput (docs/operations.md, "Memory"). bench/ runs the service
# with these lines too. Raise it with the container's memory limit.
ENV BUN_JSC_forceRAMSize=536870912
# Below a quarter of that budget the heap may grow to 2x what was live after the last full
# collection before the next one; 1.75x lowered the peak RSS under load by ~10 MB with no CPU per
# request measurable. Not 1.5 or less: JavaScriptCore then runs a full collection every cycle
# (its young generation must stay above a third of the limit), several times the GC time.
ENV BUN_JSC_smallHeapGrowthFactor=1.75
COPY --from=dependencies /app/node_modules ./node_modules
COPY package.json bun.lock tsconfig.json ./
COPY drizzle ./drizzle
COPY src ./src
RUN mkdir -p /app/.data && chown -R bun:bun /app/.data
USER bun
EXPOSE 3000
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["bun", "-e", "fetch('http://127.0.0.1:' + (process.env.PORT || 3000) + '/healthz').then(r => process.exit(r.ok ? 0 : 1), () => process.exit(1))"]
# src/index.ts applies pending migrations (under an advisory lock, safe with many replicas
# starting at once) and then starts the server; exec form, so SIGTERM reaches Bun and drains.
CMD ["bun", "run", "src/index.ts"]
