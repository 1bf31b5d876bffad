package cli

import (
	"context"
	"flag"
	"fmt"
	"strings"

	"github.com/gensee/gensee/spec"
)

type auditOptions struct {
	contract string
	json     bool
}

func auditCommand() *Command {
	return &Command{
		Name:    "audit",
		Summary: "show what a contract grants and which of its controls this host can enforce",
		Args:    "--contract F [--json]",
		Long: `Each control the contract grants is "enforceable" (every host feature it
needs was verified here), "observed_only" (a feature is missing: the runtime
cannot enforce it on this host), or "unverified" (a probe could not run, e.g.
without root); controls the contract does not ask for are "not_granted".
Nothing unverified is ever reported as enforceable.

As root the kernel probes run in a throwaway network namespace the audit
creates and destroys: a table using "socket cgroupv2", a "log group" (NFLOG)
rule, and the runtime's own table for this contract, each read back and
deleted. It also reads /proc/self/mountinfo (cgroup2, including hybrid
/sys/fs/cgroup/unified) and /proc/filesystems (overlay).

--json prints one object with sorted keys: schema "gensee.audit/v1",
contract {id, version, digest}, grants {network {mode, allow[], loopback},
workspace, deadline, products[]}, controls[] {name, granted, status,
mechanism, requires[], detail} (order: network, capabilities, deadline,
products), host {root, kernel, probes[] {name, result, detail}} with result
ok | missing | unknown, verdict (enforceable | unverified | observed_only)
and exit_code.

Exit 0 when every granted control is enforceable, 3 when some control is
only observed or unverified here, 1 for an invalid contract.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o auditOptions
			fs.StringVar(&o.contract, "contract", "", "contract JSON file `F` (- for stdin)")
			fs.BoolVar(&o.json, "json", false, "print the report as JSON")
			return o.run
		},
	}
}

func (o *auditOptions) run(ctx context.Context, env *Env) error {
	if err := required(map[string]string{"contract": o.contract}); err != nil {
		return err
	}
	findingsTo := env.Stdout
	if o.json {
		findingsTo = env.Stderr // keep stdout JSON-only
	}
	c, err := env.readContract(o.contract, findingsTo)
	if err != nil {
		return err
	}
	digest, err := spec.Digest(*c)
	if err != nil {
		return fail(ExitRefused, "digest contract "+o.contract, err, "")
	}
	probe := env.Probe
	if probe == nil {
		probe = probeHost
	}
	rep := buildAudit(c, digest, probe(ctx, c.Network))
	if o.json {
		if err := writeJSON(env.Stdout, rep); err != nil {
			return fail(ExitUsage, "write report", err, "")
		}
	} else {
		renderAudit(env.Stdout, rep)
	}
	if rep.ExitCode == ExitOK {
		return nil
	}
	var weak []string
	for _, ctl := range rep.Controls {
		if ctl.Granted && ctl.Status != StatusEnforceable {
			weak = append(weak, ctl.Name+" ("+ctl.Status+")")
		}
	}
	fix := "see the probes above for what this host lacks"
	if !rep.Host.Root {
		fix = "run the audit as root to probe the kernel"
	}
	return fail(ExitObserved, "", fmt.Errorf("not every granted control is verified enforceable on this host: %s", strings.Join(weak, ", ")), fix)
}
