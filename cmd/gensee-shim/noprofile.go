//go:build !gensee_profile

package main

// startProfile without the gensee_profile build tag (profile.go): no
// profiling code is linked, so the runtime's heap profiling stays off, as
// in containerd's own shim. GENSEE_PROFILE in the environment does
// nothing.
func startProfile() func() { return func() {} }
