# syntax=docker/dockerfile:1
# The `distillery` binary (coordinator, worker, submit and every local command) in a small
# non-root image. Build from the repository root:
#
#   docker build -t registry.example.com/distillery:0.1.0 .
#
# Kubernetes manifests: k8s/ (the pods run it as uid 10001 with a read-only root filesystem).

# ---- build ---------------------------------------------------------------------------------
FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# The cache mounts keep the registry and target/ between builds (BuildKit); the binary is
# copied out of the cached target/ because cache mounts are not part of the layer.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/usr/local/cargo/git \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked -p distillery-cli \
 && install -D -m 0755 target/release/distillery /out/distillery

# ---- runtime -------------------------------------------------------------------------------
FROM debian:bookworm-slim
# ca-certificates: TLS to object stores and LLM servers (rustls with the system's roots).
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --system --gid 10001 distillery \
 && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/distillery \
      --no-create-home --shell /usr/sbin/nologin distillery \
 && install -d -o 10001 -g 10001 -m 0750 /var/lib/distillery
COPY --from=build /out/distillery /usr/local/bin/distillery
# Numeric, so Kubernetes can verify runAsNonRoot without reading /etc/passwd.
USER 10001:10001
WORKDIR /var/lib/distillery
# 7070: coordinator gRPC; 9090: /metrics, /healthz, /readyz.
EXPOSE 7070 9090
ENTRYPOINT ["distillery"]
CMD ["--help"]
