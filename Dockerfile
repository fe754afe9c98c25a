# syntax=docker/dockerfile:1
# prestop-injector: a static-ish Rust binary on distroless (glibc, no shell, uid 65532),
# and beside it the static cleaner program prestop-clean, which the injected init
# container copies into each pod (`prestop-clean install DIR`) and the sidecar runs.
#   docker build -t ghcr.io/prestop-injector/prestop-injector:0.1.0 .
# deploy/base/kustomization.yaml names that image; change it there (images:) for yours.

FROM rust:1.95-bookworm AS build
WORKDIR /src
COPY . .
# Cache mounts keep the registry and target/ between builds (BuildKit).
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    cargo build --release --locked --bin prestop-injector \
 && install -D -m 0755 target/release/prestop-injector /out/prestop-injector \
 && triple="$(rustc -vV | sed -n 's/^host: //p')" \
 && CLEANER_TRIPLE="$triple" bash scripts/build-cleaner.sh \
 && install -D -m 0555 "target/$triple/release-cleaner/prestop-clean" /out/prestop-clean

# cc: glibc and libgcc, which the binary links; nonroot: uid/gid 65532.
FROM gcr.io/distroless/cc-debian12:nonroot
COPY --from=build /out/prestop-injector /usr/local/bin/prestop-injector
# Static: runs in any container it is copied into, with or without a libc or a shell.
COPY --from=build /out/prestop-clean /usr/local/bin/prestop-clean
USER 65532:65532
# 8443: HTTPS admission reviews; 8080: /healthz /readyz /metrics (plain HTTP).
EXPOSE 8443 8080
ENTRYPOINT ["/usr/local/bin/prestop-injector"]
CMD ["serve"]
