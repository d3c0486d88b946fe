# syntax=docker/dockerfile:1
# One image for every Trellis service. The service is chosen at run time:
#   docker run trellis serve tasks          (argument; what deploy/k8s does)
#   docker run -e TRELLIS_SERVICE=tasks trellis   (environment)
#   docker build --build-arg TRELLIS_SERVICE=tasks -t trellis-tasks .   (image default)
# `trellis migrate` (the Kubernetes migration Job) runs from the same image.
#
# Runs as a non-root user and needs no writable path but /tmp (tsx's compile
# cache), so it works with a read-only root filesystem and an emptyDir on /tmp.

ARG NODE_IMAGE=node:20.20-bookworm-slim

# ---- build: install from the lockfile, build whatever has a build step, then
# drop the dev dependencies.
FROM ${NODE_IMAGE} AS build
WORKDIR /app
ENV CI=true
COPY . .
RUN npm ci --no-audit --no-fund \
 && npm run build --workspaces --if-present \
 && npm prune --omit=dev --no-audit --no-fund \
 && rm -rf /root/.npm

# ---- runtime: the sources (Trellis runs TypeScript through tsx), production
# dependencies, owned by root and read-only for the service user.
FROM ${NODE_IMAGE} AS runtime
ARG TRELLIS_SERVICE=gateway
ENV NODE_ENV=production \
    TRELLIS_SERVICE=${TRELLIS_SERVICE} \
    TRELLIS_HOST=0.0.0.0
WORKDIR /app
COPY --from=build /app /app
RUN groupadd --system --gid 10001 trellis \
 && useradd --system --uid 10001 --gid trellis --home-dir /nonexistent --no-create-home --shell /usr/sbin/nologin trellis
USER 10001:10001
# The services' default ports (gateway 8080; chat, tasks, receipts, adapters 7001–7004).
EXPOSE 8080 7001 7002 7003 7004
ENTRYPOINT ["node", "/app/bin/trellis.js"]
CMD ["serve"]
