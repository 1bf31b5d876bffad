// Package config owns the operator's configuration of the gensee runtime and
// the translation of the runtime options containerd sends (runc options,
// or runtimeoptions.v1.Options from CRI and `ctr --runtime-config-path`)
// into the runc options the wrapped task service understands.
//
// The operator config is trusted only when it is a root-owned regular file
// that group and other cannot write; callers never choose the catalog, the
// trust anchor or the state directory.
package config
