// Package nsfile identifies Linux namespaces by their nsfs files and says
// who owns them: the identity (device, inode) of a namespace, the user
// namespace that owns it, and a side-effect-free open of a caller-named
// namespace path. The shim and the OCI hooks adapter check with it that a
// container's network namespace is one whose root is bound by the
// capability policy. It only reads; it never enters or creates a namespace.
package nsfile
