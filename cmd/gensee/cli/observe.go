package cli

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os/user"

	"github.com/gensee/gensee/shim/hostrun"
	"github.com/gensee/gensee/shim/observe"
	"github.com/gensee/gensee/spec"
	specs "github.com/opencontainers/runtime-spec/specs-go"
)

// maxOCIConfigBytes bounds --spec; the runtime's bound is the same 4 MiB.
const maxOCIConfigBytes = 4 << 20

type observeOptions struct {
	bundle, rootfs, config string // config: --spec, the OCI config.json
	digest                 bool
	oldConfig              bool // the deprecated --config spelling was used
	// host command mode (gensee observe -- CMD)
	user, workspace string
	env             stringList
	fs              *flag.FlagSet
}

func observeCommand() *Command {
	return &Command{
		Name:     "observe",
		Summary:  "compute the observation the runtime derives at Create (preflight)",
		Args:     "--bundle DIR | --rootfs DIR --spec F | --workspace DIR [--user U] [--env K=V]... -- CMD [ARG]... [--digest]",
		Trailing: true,
		Long: `Derives what the runtime re-derives from a bundle at task Create: the
process uid/gid, the sha256 of the executable process.args[0] resolves to
inside the rootfs (never escaping it), and the command digest over args,
env and cwd. Prints the observation as canonical JSON on stdout (the value
for the io.gensee.boundary.observation annotation, and the input of
gensee inference make) and its digest on stderr; with --digest, prints only
the digest on stdout. --spec is an OCI runtime config.json (observe reads
no operator config); --config is its old, deprecated spelling.

With a command after --, computes what gensee boundary run re-derives for
it: the uid/gid of --user (a name or uid; default the invoking user as
boundary run finds it from the kernel, never from SUDO_UID), the sha256
of the executable argv[0] resolves to on
the run's fixed PATH (or relative to --workspace), and the command digest
over argv, the run's environment (PATH, HOME, LANG, USER, then each --env)
and cwd = --workspace.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o observeOptions
			fs.StringVar(&o.bundle, "bundle", "", "OCI bundle directory `DIR` (config.json and its root.path)")
			fs.StringVar(&o.rootfs, "rootfs", "", "container root file system `DIR` (with --config)")
			fs.StringVar(&o.config, "spec", "", "OCI runtime config.json `F` (with --rootfs)")
			fs.Var(deprecatedAlias{p: &o.config, used: &o.oldConfig}, "config", "deprecated: use --spec (an OCI config.json, not the operator config)")
			fs.BoolVar(&o.digest, "digest", false, "print only the observation digest")
			fs.StringVar(&o.workspace, "workspace", "", "host command: the workspace `DIR` (its cwd)")
			fs.StringVar(&o.user, "user", "", "host command: the user `U` (name or uid) it runs as")
			fs.Var(&o.env, "env", "host command: `K=V` in its environment (repeatable)")
			o.fs = fs
			return o.run
		},
	}
}

func (o *observeOptions) run(_ context.Context, env *Env) error {
	if o.oldConfig {
		env.warnf("observe --config is deprecated: it names an OCI config.json, not the operator config; use --spec")
	}
	var (
		obs spec.Observation
		err error
		src string
	)
	switch {
	case o.fs != nil && o.fs.NArg() > 0:
		if o.bundle != "" || o.rootfs != "" || o.config != "" {
			return errUsage("a command after -- excludes --bundle, --rootfs and --spec")
		}
		src = "host command " + o.fs.Arg(0)
		if obs, err = o.host(env); err != nil {
			return err
		}
	case o.workspace != "" || o.user != "" || len(o.env) > 0:
		return errUsage("--workspace, --user and --env go with a command after --")
	case o.bundle != "" && (o.rootfs != "" || o.config != ""):
		return errUsage("--bundle excludes --rootfs and --spec")
	case o.bundle != "":
		src = "bundle " + o.bundle
		obs, err = observe.FromBundle(o.bundle)
	case o.rootfs != "" && o.config != "":
		src = "rootfs " + o.rootfs
		var cfg *specs.Spec
		if cfg, err = env.readOCIConfig(o.config); err != nil {
			return err
		}
		obs, err = observe.FromRootfs(o.rootfs, cfg)
	case o.rootfs != "" || o.config != "":
		return errUsage("--rootfs and --spec go together")
	default:
		return errUsage("pass --bundle DIR, or --rootfs DIR with --spec F")
	}
	if err != nil {
		return observeErr(src, err)
	}
	digest, err := obs.Digest()
	if err != nil {
		return fail(ExitRefused, "digest observation", err, "")
	}
	if o.digest {
		fmt.Fprintln(env.Stdout, digest)
		return nil
	}
	b, err := spec.CanonicalJSON(obs)
	if err != nil {
		return fail(ExitRefused, "encode observation", err, "")
	}
	fmt.Fprintf(env.Stdout, "%s\n", b)
	fmt.Fprintf(env.Stderr, "observation digest: %s\n", digest)
	return nil
}

func (e *Env) readOCIConfig(path string) (*specs.Spec, error) {
	data, err := e.readInput(path, maxOCIConfigBytes)
	if err != nil {
		return nil, readErr("OCI config", path, err)
	}
	if len(data) > maxOCIConfigBytes {
		return nil, fail(ExitRefused, "read OCI config "+path, fmt.Errorf("larger than %d bytes", maxOCIConfigBytes), "")
	}
	var cfg specs.Spec
	if err := json.Unmarshal(data, &cfg); err != nil {
		return nil, fail(ExitRefused, "decode OCI config "+path, err, "pass an OCI runtime config.json")
	}
	return &cfg, nil
}

// observeErr maps observe's failures: what the bundle says (no process, no
// executable, not executable, too large) is a refusal (exit 1); a
// directory or file that cannot be opened is I/O (exit 2).
func observeErr(src string, err error) error {
	switch {
	case errors.Is(err, observe.ErrExecutableNotFound), errors.Is(err, observe.ErrNotExecutable), errors.Is(err, observe.ErrExecutableTooLarge):
		return fail(ExitRefused, "observe "+src, err, "fix process.args[0] or the image so it names an executable inside the rootfs")
	case errors.Is(err, fs.ErrNotExist), errors.Is(err, fs.ErrPermission):
		return fail(ExitUsage, "observe "+src, err, "check the path and permissions")
	case errors.Is(err, observe.ErrInvalidBundle):
		return fail(ExitRefused, "observe "+src, err, "fix the bundle's config.json (root.path, process.args)")
	}
	return fail(ExitUsage, "observe "+src, err, "")
}

// host computes a host command's observation as boundary run will.
func (o *observeOptions) host(env *Env) (spec.Observation, error) {
	var id hostrun.Identity
	var err error
	if o.user != "" {
		if id, err = hostrun.NamedUser(o.user, user.Lookup, user.LookupId); err != nil {
			return spec.Observation{}, fail(ExitUsage, "--user "+o.user, err, "name a user of this host by login name or uid")
		}
	} else if id, err = hostrun.InvokingUser(user.LookupId); err != nil {
		return spec.Observation{}, fail(ExitUsage, "find the invoking user", err, "name the account the command will run as with --user")
	}
	cmd, rf := hostrun.NewCommand(o.fs.Args(), o.env, o.workspace, id)
	if rf != nil {
		return spec.Observation{}, fail(ExitRefused, "observe host command", rf, "")
	}
	obs, _, rf := hostrun.Observe(cmd)
	if rf != nil {
		return spec.Observation{}, fail(ExitRefused, "observe host command", rf, "")
	}
	return obs, nil
}

// deprecatedAlias is an old flag spelling that sets the new one's value.
type deprecatedAlias struct {
	p    *string
	used *bool
}

func (a deprecatedAlias) String() string {
	if a.p == nil {
		return ""
	}
	return *a.p
}

func (a deprecatedAlias) Set(v string) error { *a.p, *a.used = v, true; return nil }
