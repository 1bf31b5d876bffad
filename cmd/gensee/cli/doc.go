// Package cli is the gensee operator command line (docs/design.md §9): a small tree
// of commands (registry.go), one file per command group, each leaf parsing
// its flags into an options struct. ctr's conventions hold across the tree
// (command.go, global.go): global -a/--address and -n/--namespace with
// $CONTAINERD_ADDRESS/$CONTAINERD_NAMESPACE defaults, --debug, --version,
// ids as arguments, --format json|table beside every --json; shell
// completion (completion.go) and docs/cli.md (docs.go) are generated from
// the tree. Leaves call spec, shim/trust, shim/retention (ls, prune),
// shim/observe, shim/config, shim/record, shim/gate and shim/events
// (reading operation records, events and attention; events --follow
// --address subscribes to containerd's event service) and, for the audit's
// kernel probes, shim/netpolicy. It owns exit codes and operator-facing
// messages.
//
// It must never take a trust key from a caller except where docs/design.md §3 allows
// it (catalog inspect --trusted-key; the signing commands read the private
// key they sign with), never write the runtime's catalog high-water state,
// never overwrite a key file, never write into an operation's records (two
// exceptions: attention clear, a person's decision, records the clearing
// on each open finding of attention.json through shim/events; manifest
// verify raises a product_mismatch finding through shim/verify; prune
// removes whole records the operator config's [retention] lets go, through
// shim/retention), never follow a symlink
// below one, and never leave a namespace, table or file behind after a
// probe.
package cli
