// This directory is not built in this module: hack/build-binaries.sh copies
// each main into a copy of github.com/cert-manager/cert-manager (their
// imports of internal/ packages are legal only there) and builds it with that
// module's go.mod. This go.mod only keeps ./... of the project away from them.
module spreadguard.local/hack/kind-without-registry/cert-manager

go 1.26.0
