# gpubot's container image: docker build --build-arg VERSION=$(git describe --tags --always) -t ghcr.io/gpubot/gpubot:VERSION .
# (make image does exactly that.) Stage 1 builds a static binary with the
# version stamped in; stage 2 is distroless static, non-root, nothing else.
# Both bases are pinned by digest; to update one: crane digest IMAGE:TAG.

FROM golang:1.26@sha256:3aff6657219a4d9c14e27fb1d8976c49c29fddb70ba835014f477e1c70636647 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 GOFLAGS=-buildvcs=false go build -trimpath -ldflags "-s -w -X main.version=${VERSION}" -o /out/gpubot ./cmd/gpubot

FROM gcr.io/distroless/static-debian12:nonroot@sha256:afa5c872c891853ca7fcf1f12c3edb23f7eeef36189728842dd51042ff57f7ab
COPY --from=build /out/gpubot /usr/local/bin/gpubot
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/gpubot"]
CMD ["slack", "--in-cluster", "--data-dir=/var/lib/gpubot", "--config=/etc/gpubot/gpubot.yaml", "--http-addr=:8080"]
