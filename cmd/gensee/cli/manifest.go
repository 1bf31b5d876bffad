package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
	"golang.org/x/sys/unix"
)

func manifestCommand() *Command {
	return &Command{
		Name:    "manifest",
		Summary: "show an operation's effect manifest and check its staged products",
		Subs:    []*Command{manifestShowCommand(), manifestVerifyCommand()},
	}
}

// opRef names one operation: by container (the newest operation the index
// records for it) or by operation id. Both read the state dir the operator
// config names. A leaf that takes one sets Positional: "container", so
// gensee manifest show ID is --container ID; an ID the index does not know
// that is an operation id (as gensee ls prints it) names that operation.
type opRef struct {
	container, namespace, operation, config string
	fs                                      *flag.FlagSet
}

const (
	opRefArgs       = "[ID | --container ID | --operation ID] [-n NS] [--config F]"
	opRefPositional = "container"
)

func (r *opRef) flags(fs *flag.FlagSet) {
	r.fs = fs
	fs.StringVar(&r.container, "container", "", "container `ID` whose newest operation to read (or ID as the argument)")
	// The leaf's own -n/--namespace, so a namespace given here (and only
	// here) is checked against --operation. Defined while empty so help
	// shows no default; unset, resolve takes the global one.
	for _, name := range []string{"namespace", "n"} {
		fs.StringVar(&r.namespace, name, "", "containerd namespace `NS` of the container (default: the global -n, $"+EnvNamespace+", else "+DefaultNamespace+"; CRI uses k8s.io)")
	}
	r.namespace = DefaultNamespace
	fs.StringVar(&r.operation, "operation", "", "operation `ID` (32 hex characters) to read")
	addConfigFlag(fs, &r.config)
}

// namespaceOf is the namespace the container is looked up in: the leaf's
// -n/--namespace when given, else the global one.
func (r *opRef) namespaceOf(env *Env) string {
	set := false
	if r.fs != nil {
		r.fs.Visit(func(f *flag.Flag) { set = set || f.Name == "namespace" || f.Name == "n" })
	}
	if set {
		return r.namespace
	}
	return env.globals().namespace
}

// operation is one operation's directory and its parsed manifest.
type operation struct {
	stateDir string
	id       string
	dir      string
	who      string // "namespace/container" as admission.json records it, or ""
	raw      []byte // manifest.json as stored
	m        *spec.Manifest
	notify   []string // the operator config's notify_command
}

// resolve finds the operation r names and checks its directory exists,
// without reading any record in it (a running task has no manifest yet).
// A missing index entry or directory exits 2.
func (r *opRef) resolve(env *Env) (*operation, error) {
	switch {
	case r.container == "" && r.operation == "":
		return nil, errUsage("pass --container ID (with --namespace NS) or --operation ID, or the container id as the argument")
	case r.container != "" && r.operation != "":
		return nil, errUsage("--container and --operation exclude each other")
	case r.operation != "" && r.namespace != "default":
		return nil, errUsage("--namespace goes with --container; an operation id names one operation")
	}
	cfg, err := env.operatorConfig(r.config)
	if err != nil {
		return nil, err
	}
	store := record.Store{Dir: cfg.StateDir}
	op := &operation{stateDir: cfg.StateDir, id: r.operation, notify: cfg.NotifyCommand}
	if r.container != "" {
		ns := r.namespaceOf(env)
		if op.id, err = store.Lookup(ns, r.container); err != nil {
			if dir, derr := store.OperationDir(r.container); derr == nil && exists(dir) {
				op.id = r.container // an operation id given as the argument
			} else {
				return nil, fail(ExitUsage, "find operation", err,
					"check the container id and -n/--namespace (CRI uses k8s.io), or pass --config F naming the runtime's state_dir")
			}
		}
	}
	if op.dir, err = store.OperationDir(op.id); err != nil {
		return nil, errUsage("--operation: %v (want the 32 hex characters of an operation id)", err)
	}
	if _, err := os.Lstat(op.dir); err != nil {
		return nil, fail(ExitUsage, "find operation "+op.id, fmt.Errorf("no directory %s in state dir %s", op.dir, op.stateDir),
			"check the operation id, or pass --config F naming the runtime's state_dir")
	}
	op.who = admittedContainer(op.dir)
	return op, nil
}

// exists reports whether p names anything, without following a symlink.
func exists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}

// store is the state dir op was found in.
func (op *operation) store() record.Store { return record.Store{Dir: op.stateDir} }

// load resolves r and reads the operation's manifest. Missing records and
// unreadable files exit 2; a manifest that fails validation exits 1 with
// its findings on findingsTo.
func (r *opRef) load(env *Env, findingsTo io.Writer) (*operation, error) {
	op, err := r.resolve(env)
	if err != nil {
		return nil, err
	}
	raw, err := readRecord(op.dir, record.ManifestFile, spec.MaxManifestBytes)
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, fail(ExitUsage, "read manifest of operation "+op.id, fmt.Errorf("%s does not exist yet", filepath.Join(op.dir, record.ManifestFile)),
			"the runtime writes it when the task exits; if the task has exited, its shim died before the gate ran: see the operation's events (gensee events --operation "+op.id+")")
	case err != nil:
		return nil, readErr("manifest", filepath.Join(op.dir, record.ManifestFile), err)
	}
	op.raw = raw
	if op.m, err = spec.ParseManifest(raw); err != nil {
		return nil, invalid(findingsTo, "manifest "+filepath.Join(op.dir, record.ManifestFile), err,
			"the record was damaged or written by an incompatible runtime; do not trust its products")
	}
	return op, nil
}

// readRecord reads a runtime record in an operation directory without
// following a symlink at either component, refusing anything but a regular
// file of at most max bytes (fsafe: *TooLargeError above).
func readRecord(dir, name string, max int) ([]byte, error) {
	dfd, err := fsafe.OpenDirAt(unix.AT_FDCWD, dir)
	if err != nil {
		return nil, err
	}
	defer unix.Close(dfd)
	return fsafe.ReadFileAt(dfd, name, int64(max))
}

// maxAdmissionBytes bounds admission.json (it embeds the contract).
const maxAdmissionBytes = 4 << 20

// admittedContainer reads who the operation governed from admission.json,
// for display only: "" when the record is missing or unreadable.
func admittedContainer(dir string) string {
	var a spec.Admission
	raw, err := readRecord(dir, record.AdmissionFile, maxAdmissionBytes)
	if err != nil || json.Unmarshal(raw, &a) != nil || a.ContainerID == "" {
		return ""
	}
	return a.Namespace + "/" + a.ContainerID
}

type manifestShowOptions struct {
	ref          opRef
	json, inToto bool
}

func manifestShowCommand() *Command {
	return &Command{
		Name:       "show",
		Summary:    "print an operation's effect manifest: a summary, the JSON, or an in-toto statement",
		Args:       opRefArgs + " [--json | --in-toto]",
		Positional: opRefPositional,
		Long: `Reads <state_dir>/operations/<opid>/manifest.json, for the newest operation
of a container (the runtime's index) or for an operation id, and checks it
with the runtime's strict manifest rules: an invalid one exits 1 with one
"<json path>: <message>" line per problem on stderr.

By default prints a summary: contract, how it was chosen, subject, what was
enforced (network policy, capabilities) apart from what was only observed
(counters, denied attempts), the gate's verdict and violations, and every
product with its digest and staged path. --json prints manifest.json as
stored. --in-toto prints an in-toto Statement v1 with predicateType
  ` + inTotoPredicateType + `
whose subjects are the staged files with their sha256 (a directory product
contributes one subject per file, named <slot>/<path>) and whose predicate
is the manifest; with nothing staged there is no subject and it exits 1.
For each promotion of the operation (gensee promote) one more statement
follows, each its own JSON document, with predicateType
  ` + inTotoPromotionType + `
whose subjects are the promoted files at the destination (<dest>, or
<dest>/<path> in a directory product) and whose predicate is the promotion
record, the receipt envelope included.

The summary says what the manifest does not: products are checked for
structure, never meaning (semantically verified: no), and stay staged
(promoted: no: the manifest describes the run). It then lists the
operation's promotions (promotions.jsonl), if any: when, the slot, where
to, its digest, the receipt and its verifier, and who. Use gensee manifest
verify to re-hash the staged copies.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o manifestShowOptions
			o.ref.flags(fs)
			fs.BoolVar(&o.json, "json", false, "print manifest.json as stored")
			fs.BoolVar(&o.inToto, "in-toto", false, "print an in-toto Statement v1 with the manifest as predicate")
			return o.run
		},
	}
}

func (o *manifestShowOptions) run(_ context.Context, env *Env) error {
	if o.json && o.inToto {
		return errUsage("--json and --in-toto exclude each other")
	}
	op, err := o.ref.load(env, env.Stderr)
	if err != nil {
		return err
	}
	switch {
	case o.json:
		out := op.raw
		if len(out) == 0 || out[len(out)-1] != '\n' {
			out = append(out[:len(out):len(out)], '\n')
		}
		_, err = env.Stdout.Write(out)
	case o.inToto:
		st, serr := newInTotoStatement(op)
		if serr != nil {
			return serr
		}
		err = writeJSON(env.Stdout, st)
		for _, p := range promotionsOf(env, op) {
			if err != nil {
				break
			}
			var ps *inTotoStmt
			if ps, err = promotionStatement(p, op.m); err == nil {
				err = writeJSON(env.Stdout, ps)
			}
		}
	default:
		if err = renderManifest(env.Stdout, op); err == nil {
			renderPromotions(env.Stdout, promotionsOf(env, op))
		}
	}
	if err != nil {
		return fail(ExitUsage, "write output", err, "")
	}
	return nil
}
