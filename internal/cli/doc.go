// Package cli is the gensee operator command line (DESIGN §9): a small tree
// of commands (registry.go), one file per command group, each leaf parsing
// its flags into an options struct and calling spec, shim/trust,
// shim/observe, shim/config, shim/record, shim/gate and shim/events
// (reading operation records, events and attention; events --follow
// --address subscribes to containerd's event service) and, for the audit's
// kernel probes, shim/netpolicy. It owns exit codes and operator-facing
// messages.
//
// It must never take a trust key from a caller except where DESIGN §3 allows
// it (catalog inspect --trusted-key; the signing commands read the private
// key they sign with), never write the runtime's catalog high-water state,
// never overwrite a key file, never write into an operation's records (one
// exception: attention clear, a person's decision, removes attention.json
// through shim/events), never follow a symlink below one, and never leave a
// namespace, table or file behind after a probe.
package cli
