# syntax=docker/dockerfile:1
# floodgate: both binaries, static, on distroless, as a non-root user.
#   docker build -t floodgate .
#   docker run --rm -p 7700:7700 -p 7701:7701 floodgate   # a single node
# With no arguments the node serves gRPC and HTTP on every interface (CMD
# below); arguments replace CMD, so a node of a cluster names every bind
# it needs (--grpc-addr 0.0.0.0:7700 --raft-addr 0.0.0.0:7702 ...).
# The data directory is /var/lib/floodgate (a volume: keep it across
# restarts, it holds the node's identity and its Raft logs).

FROM golang:1.26-bookworm AS build
WORKDIR /src
# Modules first, so a code change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
RUN CGO_ENABLED=0 go build -trimpath -buildvcs=false \
        -ldflags "-s -w -X github.com/floodgate/floodgate/version.Override=${VERSION}" \
        -o /out/floodgate ./cmd/floodgate && \
    CGO_ENABLED=0 go build -trimpath -buildvcs=false \
        -ldflags "-s -w -X github.com/floodgate/floodgate/version.Override=${VERSION}" \
        -o /out/floodgatectl ./cmd/floodgatectl
# The data directory, owned by the nonroot user (65532): distroless has
# none, and a VOLUME over a missing directory is created root-owned, where
# floodgate cannot write its LOCK file.
RUN mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/floodgate /out/floodgatectl /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/floodgate
# 7700 gRPC (clients, peers), 7701 HTTP, 7702 Raft, 7703 gossip (TCP+UDP).
EXPOSE 7700 7701 7702 7703 7703/udp
VOLUME ["/var/lib/floodgate"]
USER nonroot:nonroot
ENTRYPOINT ["/usr/local/bin/floodgate", "--data-dir", "/var/lib/floodgate"]
# floodgate binds loopback by default; in a container that is unreachable.
CMD ["--grpc-addr", "0.0.0.0:7700", "--http-addr", "0.0.0.0:7701"]
