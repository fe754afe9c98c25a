# syntax=docker/dockerfile:1
# The release image: prestop-injector (webhook and node reaper) and the cleaner program
# prestop-clean, both static, on an empty root (distroless-static style: no shell, no
# libc, no package manager), uid/gid 65532.
#
# With a network (BuildKit: `docker build`, `podman build`), the builder stage compiles both:
#   docker build -t registry.example.com/prestop-injector:0.1.0 .
# Offline (CI, scripts/build-image.sh), the same runtime stage takes binaries built before,
# from a context directory that holds only them; the builder stage is then never built:
#   buildah bud --build-arg BINARIES=prebuilt -f Dockerfile DIR   # DIR/prestop-injector, DIR/prestop-clean
# deploy/base/kustomization.yaml names the image; override it there (`images:`) and set
# `cleaner.image` in config.yaml to the same name (docs/INSTALL.md).

# Which stage supplies /out: `build` (compile here) or `prebuilt` (the context's files).
ARG BINARIES=build

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and target/ between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    bash scripts/build-binaries.sh /out

FROM scratch AS prebuilt
COPY prestop-injector prestop-clean /out/

FROM ${BINARIES} AS binaries

FROM scratch
COPY --from=binaries /out/prestop-injector /usr/local/bin/prestop-injector
# The program the injected init container copies into each pod (`prestop-clean install
# DIR`) and the sidecar runs: at the path `cleaner.image` is expected to hold it
# (src/mutation/hook.rs IMAGE_PROGRAM).
COPY --from=binaries /out/prestop-clean /usr/local/bin/prestop-clean
# Numeric, so runAsNonRoot can verify it without an /etc/passwd.
USER 65532:65532
# mimalloc commits its first arena up front; where transparent huge pages are `always`,
# that is whole 2 MiB pages the server never fills: 9 MiB of private memory under load
# where 2 MiB are used. Committed on demand, it keeps ~2 MiB at the same throughput
# (docs/BENCHMARKS.md). An environment variable: mimalloc reads its options at the first
# allocation, before main.
ENV MIMALLOC_ARENA_EAGER_COMMIT=0
# 8443: HTTPS admission reviews; 8080: /healthz /readyz /metrics (plain HTTP). The
# reaper (`reap`, its DaemonSet) serves its metrics on 9102.
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/prestop-injector"]
CMD ["serve"]
