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
	ref      opRef // --operation / --container: audit what an operation hit
	json     bool
}

func auditCommand() *Command {
	return &Command{
		Name:       "audit",
		Summary:    "show which of a contract's controls this host can enforce, or what an operation ran into",
		Positional: opRefPositional,
		Args:       "--contract F [--json]\n  gensee boundary audit " + opRefArgs + " [--json]",
		Long: `Two modes: --contract audits this host against a contract before anything
runs; --operation (or --container) audits what one operation ran into.

WITH --contract F. Each control the contract grants is "enforceable"
(every host feature it needs was verified here), "observed_only" (a feature
is missing: the runtime cannot enforce it on this host), or "unverified" (a
probe could not run, e.g. without root); controls the contract does not ask
for are "not_granted".
Nothing unverified is ever reported as enforceable.

As root the kernel probes run in a throwaway network namespace the audit
creates and destroys: a table using "socket cgroupv2", a "log group" (NFLOG)
rule, and the runtime's own table for this contract, each read back and
deleted. It also reads /proc/self/mountinfo (cgroup2, including hybrid
/sys/fs/cgroup/unified) and /proc/filesystems (overlay).

--json prints one object with sorted keys: schema "gensee.audit/v1",
contract {id, version, digest}, grants {network {mode, allow[], loopback},
workspace, deadline, products[]}, controls[] {name, granted, status,
mechanism, requires[], detail} (order: network, capabilities, spec, seccomp,
deadline, products), not_enforced[] {name, status, netns[], detail} (ways out
no control closes in the named network namespaces, e.g. abstract AF_UNIX
sockets in a host or pod netns), host {root, kernel, probes[] {name, result,
detail}} with result ok | missing | unknown, verdict (enforceable | unverified | observed_only)
and exit_code.

Exit 0 when every granted control is enforceable, 3 when some control is
only observed or unverified here, 1 for an invalid contract.

WITH --operation ID (or --container ID [--namespace NS]). Reads the
operation's events.jsonl and attention.json and classifies each finding:
  defeated_a_control  a control_defeat signature fired (deny_then_reach,
                      table_tampered, product_mismatch, ...): a boundary
                      failed; a security finding
  hit_a_wall          a boundary refused something and held: egress_denied,
                      admission_denied, gate_rejected, capability_removed,
                      deadline_exceeded; a hint_loop is here too, as a
                      guidance gap, never a security finding
  observed            evidence the watchdog weighs (policy_unbound,
                      flow_reached, ...), not a finding on its own
A control_defeat event and the attention finding of the same firing are one
finding. The readable report groups a wall hit repeatedly into one line
with a count; if events were dropped (the log reached its size bound) it
says the audit covers only what was written. When the contract serves ports
(network.serve) and the manifest exists, a SERVED section shows what the
table counted for them: replies, connections answered, per port, and the
inbound packets dropped for a forged source (reverse path). It classifies
nothing; a served reply to a peer denied earlier is a deny_then_reach.

--json prints one object with sorted keys: schema
"gensee.operation-audit/v1", operation_id, container, log {present, events,
dropped, malformed, complete}, attention_set, findings[] {class, security,
guidance_gap, kind, control, rule, target, detail, hint, at, sources[],
evidence[]} oldest first, counts {hit_a_wall, defeated_a_control,
observed}, verdict (defeated_a_control | hit_a_wall | nothing_refused),
exit_code and, when ports are served, served {ports[] {proto, port},
counted {packets, bytes, connections, ports[], ports_withheld,
reverse_path_dropped} or null}.

Exit 0 when nothing defeated a control, 4 when a control was defeated.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o auditOptions
			fs.StringVar(&o.contract, "contract", "", "contract JSON file `F` (- for stdin)")
			o.ref.flags(fs)
			fs.BoolVar(&o.json, "json", false, "print the report as JSON")
			return o.run
		},
	}
}

func (o *auditOptions) run(ctx context.Context, env *Env) error {
	byOperation := o.ref.operation != "" || o.ref.container != ""
	switch {
	case o.contract != "" && byOperation:
		return errUsage("--contract and --operation/--container exclude each other: audit a contract or an operation")
	case byOperation:
		return o.runOperation(ctx, env)
	case o.contract == "":
		return errUsage("pass --contract F (what this host can enforce) or --operation ID / --container ID (what an operation ran into)")
	case o.ref.config != "" || o.ref.namespace != "default":
		return errUsage("--config and --namespace go with --operation/--container")
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
