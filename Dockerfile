# tephra's image: one static binary (every subcommand: scheduler, controller-manager, extender,
# job/queue/pg/cluster, sim, dev) on distroless, running as a non-root user.
#
#   docker build -t tephra:dev .
#
# The build needs only crates.io; kube talks TLS through rustls, so nothing links OpenSSL and a
# musl build is fully static. musl-tools also compiles mimalloc, the binary's allocator (musl's
# own malloc is slower still than glibc's, which the end-to-end bench found too slow).

FROM rust:1.91-bookworm AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends musl-tools \
 && rm -rf /var/lib/apt/lists/* \
 && rustup target add x86_64-unknown-linux-musl
WORKDIR /src
COPY . .
RUN cargo build --release --locked -p tephra --target x86_64-unknown-linux-musl \
 && cp target/x86_64-unknown-linux-musl/release/tephra /tephra \
 && strip /tephra

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /tephra /usr/local/bin/tephra
# distroless' nonroot user; the chart's pods also set runAsNonRoot and a read-only root.
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/tephra"]
CMD ["scheduler"]
