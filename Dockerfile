# The image of spreadguard-webhook: the static binary and nothing else, so
# that building it pulls no base image. Build the binary first:
#
#   make image    (CGO_ENABLED=0 GOOS=linux go build -o bin/linux/spreadguard-webhook ./cmd/webhook)
#
# The chart runs it with a read-only root filesystem and an emptyDir on /tmp.
FROM scratch
COPY bin/linux/spreadguard-webhook /spreadguard-webhook
USER 65532:65532
ENTRYPOINT ["/spreadguard-webhook"]
