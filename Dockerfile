# tierd's container image: the Bun-compiled single binary, built in the first stage as
# `deno task compile` builds it, on Debian slim, run as an unprivileged user.
#
#   docker build -t tierd .        (the builder stage fetches Deno, Bun and the locked npm
#                                   packages from the npm registry; works with BuildKit and the
#                                   classic builder)
#   docker run … tierd             (README, "Container image": volumes, the broker's data dir)
ARG BUILDER_IMAGE=node:20-bookworm-slim
ARG BASE_IMAGE=debian:bookworm-slim

FROM ${BUILDER_IMAGE} AS builder
WORKDIR /src
COPY package.json deno.json deno.lock ./
# The locked npm packages first: a source change rebuilds only the compile layer. (With a
# lockfile, --prod still installs every package deno.lock lists, test tools included; they stay
# in this stage.)
RUN npx -y deno@2 install --prod --frozen-lockfile
COPY main.ts ./
COPY src ./src
COPY providers ./providers
# The flags of scripts/compile.ts.
RUN npx -y bun@1 build --compile --minify --outfile /out/tierd main.ts \
  && /out/tierd --version

FROM ${BASE_IMAGE}
ARG TIERD_UID=10001
# /var/lib/iggy is where the broker's data dir (Iggy's local_data) is mounted, read-write: tierd
# removes the .log and .index of each segment it evicts (nothing else; its markers and journals
# live in the state volume). Run as the broker's uid, or give this uid write access, so it can.
RUN groupadd --system --gid "${TIERD_UID}" tierd \
  && useradd --system --uid "${TIERD_UID}" --gid tierd --home-dir /var/lib/tierd --no-create-home \
    --shell /usr/sbin/nologin tierd \
  && mkdir -p /etc/tierd /var/lib/tierd /var/cache/tierd /var/lib/iggy \
  && chown tierd:tierd /var/lib/tierd /var/cache/tierd /var/lib/iggy
COPY --from=builder /out/tierd /usr/local/bin/tierd
COPY docker/healthcheck.sh /usr/local/bin/tierd-healthcheck
COPY docker/tierd.toml /etc/tierd/tierd.toml
USER ${TIERD_UID}:${TIERD_UID}
# Config, state (journals, .remote markers, kept index copies) and the chunk cache.
VOLUME ["/etc/tierd", "/var/lib/tierd", "/var/cache/tierd"]
# 7070: the HTTP API; 8091: the binary front for Iggy clients, when [agent.iggy_tcp] is on.
EXPOSE 7070 7071 8091
HEALTHCHECK --interval=10s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/usr/local/bin/tierd-healthcheck"]
ENTRYPOINT ["/usr/local/bin/tierd"]
CMD ["run", "--config", "/etc/tierd/tierd.toml"]
