# certbroker image: one image, one CLI; the manifests in deploy/ pick the subcommand
# (`ca`, `broker`, `install-cni`). It also carries the CNI plugin and istio-iptables as
# self-contained executables (Node single executable applications) that install-cni copies
# to the host's /opt/cni/bin, where no Node.js runtime is assumed.
#
#   docker build -t certbroker:0.1.0 .
#
# The user is set per container in deploy/ (the CA runs as 1337; the node agents as root
# without capabilities, to write root-owned host directories).
#
# The node broker's Workload API reads its callers' SO_PEERCRED with core Perl (perl-base, an
# Essential package of Debian, so part of every Debian-based NODE_IMAGE): one long-lived helper
# that is handed each connection's descriptor, a Perl start per batch as its fallback; a base
# image without perl fails `certbroker broker --workload-api-socket` at start, naming the cause.

ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json ./
COPY scripts ./scripts
COPY proto ./proto
COPY src ./src
# Only src/ is compiled into the image (tests and benchmarks stay out).
RUN npx tsc -p tsconfig.json \
  && node scripts/copy-assets.mjs \
  && node scripts/build-sea.mjs --out-dir /src/build/bin \
  && test -x /src/build/bin/istio-cni && test -x /src/build/bin/istio-iptables \
  && npm prune --omit=dev --no-audit --no-fund

FROM ${NODE_IMAGE}
ENV NODE_ENV=production
WORKDIR /app
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist ./dist
COPY --from=build /src/build/bin/istio-cni /src/build/bin/istio-iptables /opt/certbroker/cni-bin/
ENTRYPOINT ["node", "/app/dist/src/cli/main.js"]
CMD ["--help"]
