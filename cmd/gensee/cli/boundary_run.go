package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/user"
	"strings"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/hostrun"
	"github.com/gensee/gensee/spec"
)

// Exit statuses of boundary run besides the command's own (0-255; 128+n
// when signal n ended it). Chosen from the top of the range, as env(1),
// timeout(1) and container runtimes do, so they stay distinct from
// ordinary command failures; documented in the command's help.
const (
	ExitRunRefused  = 125 // refused before the command started: nothing ran, nothing is left
	ExitRunDeadline = 124 // the contract's deadline passed and the command was killed
	ExitRunGate     = 123 // the product gate did not pass (unless gate_failed_exit_status says otherwise)
	ExitRunRuntime  = 122 // the runtime failed after the command started (see the log; the manifest may be missing)
)

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string     { return strings.Join(*l, ",") }
func (l *stringList) Set(v string) error { *l = append(*l, v); return nil }

type runOptions struct {
	config, catalog, observation, inference, workspace, manifest, user string
	env                                                                stringList
	fs                                                                 *flag.FlagSet
}

func runCommand() *Command {
	return &Command{
		Name:      "run",
		Summary:   "run one host command under the boundary of one admitted contract (root)",
		Args:      "[--config F] [--catalog F] [--observation F] [--inference F] --workspace DIR [--manifest F|-] [--user USER] [--env K=V]... -- CMD [ARG]...",
		Trailing:  true,
		UsageCode: ExitRunRefused,
		Long: `Runs CMD on this host, as the invoking user, in a transient cgroup
under <cgroup2>/gensee whose nftables table is installed and read back
before the command's first instruction. The command sees the workspace
through an overlay (writes land in the operation's record, never in DIR)
and every other mount read-only, with private /tmp and /var/tmp; it holds
no capability and runs with no_new_privs. At exit the cgroup is drained,
the product gate reads what the command wrote, passing products are
staged under the operation's staged/, and the effect manifest is written
to the record and copied to --manifest.

The invoking user comes from the kernel, never from the environment
(SUDO_UID, SUDO_GID and the like are ignored, and so is the loginuid,
which an unprivileged process may set while it is unset): the real uid;
under real uid 0 the real uid of the nearest ancestor process that is
not root (the account that ran sudo, su, doas or pkexec); else root,
unless gensee itself was left to pid 1 in a session whose root leader is
not its ancestor (refused: run it in a session of your own, setsid). uid 0 never runs the command: invoked by root, name
the account with --user USER (accepted only from root, never uid 0).
Invoked by anyone else, the operator config is ` + config.DefaultPath + `
(--config and $` + config.EnvConfig + ` are refused unless they name it) and
--catalog must be its catalog. --observation, --inference and --catalog
are opened as the invoking user (no symlink, a regular file), and
--manifest is written as that user, in place (never through a symlink,
never a file that user could not write). --manifest - prints the
manifest on stdout after the command ended and its cgroup was drained,
so it follows all of the command's own output.

Admission is the containers' own: selector facts runtime "host" and user
(name or uid); the observation (executable sha256 hashed from the fd that
is executed, command digest over argv, the run's fixed env PATH, HOME,
LANG, USER plus each --env, and cwd = DIR) must be the one --inference was
made for, and equal --observation when given (gensee observe -- CMD
computes it ahead of time). The trust anchor, state dir and default
catalog come from the operator config.

Exit status:
  the command's own status (128+n when signal n ended it), or
  125  refused before the command started (reason, field and fix on
       stderr; nothing was left behind)
  124  the contract's deadline passed; the command was killed
  123  the product gate did not pass (the operator config's
       gate_failed_exit_status replaces it when set)
  122  the runtime failed after the command started`,
		Setup: func(fs *flag.FlagSet) Runner {
			o := runOptions{fs: fs}
			addConfigFlag(fs, &o.config)
			fs.StringVar(&o.catalog, "catalog", "", "signed catalog `F`; default: the operator config's catalog")
			fs.StringVar(&o.observation, "observation", "", "preflight observation `F` (gensee observe -- CMD); must equal the re-derived one")
			fs.StringVar(&o.inference, "inference", "", "signed inference envelope `F` for the observation; without it, the selector's safe_default")
			fs.StringVar(&o.workspace, "workspace", "", "workspace directory `DIR` (absolute); the command's cwd, staged through an overlay")
			fs.StringVar(&o.manifest, "manifest", "", "copy the effect manifest to `F` as well, written as the invoking user (- for stdout, after the command's own output)")
			fs.StringVar(&o.user, "user", "", "run the command as `USER`, a login name or uid (only when root itself invokes boundary run; never uid 0)")
			fs.Var(&o.env, "env", "set `K=V` in the command's environment (repeatable)")
			return o.run
		},
	}
}

func (o *runOptions) run(ctx context.Context, env *Env) error {
	args := o.fs.Args()
	if len(args) == 0 {
		return errUsage("no command: put it after --, e.g. gensee boundary run --workspace DIR -- make test")
	}
	invoking, err := hostrun.InvokingUser(user.LookupId)
	if err != nil {
		return fail(ExitRunRefused, "find the invoking user", err,
			"run it through sudo from the account the command should run as, or as root (in a session of your own) with --user NAME")
	}
	id, rf := hostrun.RunAs(invoking, o.user, user.Lookup, user.LookupId)
	if rf != nil {
		return fail(ExitRunRefused, "", rf, "")
	}
	if err := o.checkCallerConfig(env, invoking); err != nil {
		return err
	}
	cfg, err := env.enforcingConfig(o.config)
	if err != nil {
		return refusedRun(err)
	}
	if err := o.checkCallerCatalog(invoking, cfg); err != nil {
		return err
	}
	creds := invokerCreds(invoking)
	if o.catalog != "" { // the engine loads it by path; the invoking user must be able to read it
		if _, err := env.readAs(creds, "catalog", o.catalog, spec.MaxEnvelopeBytes); err != nil {
			return err
		}
	}
	var obs, inf []byte
	if o.observation != "" {
		if obs, err = env.readAs(creds, "observation", o.observation, spec.MaxObservationBytes); err != nil {
			return err
		}
	}
	if o.inference != "" {
		if inf, err = env.readAs(creds, "inference", o.inference, spec.MaxEnvelopeBytes); err != nil {
			return err
		}
	}
	res, err := hostrun.Run(ctx, hostrun.Request{
		Config: cfg, Catalog: o.catalog, Observation: obs, Inference: inf,
		Workspace: o.workspace, Args: args, Env: o.env, User: id,
		Stdin: fileOr(env.Stdin), Stdout: fileOr(env.Stdout), Stderr: fileOr(env.Stderr),
	})
	if errors.As(err, &rf) {
		return fail(ExitRunRefused, "", o.quiet(rf), "")
	}
	if err != nil {
		return fail(ExitRunRuntime, "boundary run", err, "check the log; gensee boundary run removes what a failed run left on its next start")
	}
	if o.manifest != "" {
		if err := env.writeManifest(creds, o.manifest, res.ManifestRaw); err != nil {
			env.warnf("copy the manifest to %s as uid %d: %v (it is in the record: gensee manifest show --operation %s)", o.manifest, creds.UID, manifestErr(err), res.OperationID)
		}
	}
	m := res.Manifest
	fmt.Fprintf(env.Stderr, "gensee: operation %s: contract %s, gate %s, exit status %d\n", res.OperationID, m.Contract.ID, m.Gate.Verdict, res.Status)
	switch {
	case m.Deadlines.Exceeded:
		return exitStatus(ExitRunDeadline)
	case m.Gate.Verdict != spec.VerdictPass:
		for _, v := range m.Gate.Violations {
			fmt.Fprintf(env.Stderr, "gensee: gate: %s %s: %s\n", v.Rule, v.Path, v.Detail)
		}
		if cfg.GateFailedExitStatus != 0 {
			return exitStatus(int(cfg.GateFailedExitStatus))
		}
		return exitStatus(ExitRunGate)
	}
	return exitStatus(res.Status)
}

// refusedRun gives a failure before the run its refusal status.
func refusedRun(err error) error {
	var e *Error
	if errors.As(err, &e) {
		out := *e
		out.Code = ExitRunRefused
		return &out
	}
	return fail(ExitRunRefused, "", err, "")
}

// fileOr is w as a file the command can inherit, or nil (/dev/null).
func fileOr(v any) *os.File {
	if f, ok := v.(*os.File); ok {
		return f
	}
	return nil
}
