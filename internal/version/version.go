// Package version holds the build's version, set by the linker.
package version

// Version is set with -ldflags -X at build time.
var Version = "dev"
