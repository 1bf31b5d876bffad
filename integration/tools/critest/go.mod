// critest, the Kubernetes CRI validation suite, pinned. Its cmd/critest
// package holds only test files, so hack/conformance.sh copies the module
// out of the module cache and builds it with `go test -c` under the
// module's own go.mod and go.sum: nothing here imports it, and
// `go mod tidy` must not be run in this directory.
module github.com/gensee/gensee/integration/tools/critest

go 1.26.6

require sigs.k8s.io/cri-tools v1.37.0
