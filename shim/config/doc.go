// Package config owns the operator's configuration of the gensee runtime.
// The runtime options containerd sends with a task are read by
// shim/runtimeopts, the shim's alone.
//
// The operator config is trusted only when it is a root-owned regular file
// that group and other cannot write; callers never choose the catalog, the
// trust anchor or the state directory.
package config
