package cli

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/gensee/gensee/spec"
)

func boundaryCommand() *Command {
	return &Command{
		Name:    "boundary",
		Summary: "check contracts and what this host can enforce",
		Subs:    []*Command{validateCommand(), auditCommand(), runCommand()},
	}
}

type validateOptions struct {
	contract string
}

func validateCommand() *Command {
	return &Command{
		Name:    "validate",
		Summary: "check a contract document against every rule of docs/design.md §4",
		Args:    "--contract F",
		Long: `Prints "valid: <id>" and exits 0, or prints one line per broken rule on
stdout, "<json path>: <message>", and exits 1. The decoder is the runtime's:
unknown fields, duplicate keys, floats and hostnames are errors.`,
		Setup: func(fs *flag.FlagSet) Runner {
			var o validateOptions
			fs.StringVar(&o.contract, "contract", "", "contract JSON file `F` (- for stdin)")
			return o.run
		},
	}
}

func (o *validateOptions) run(_ context.Context, env *Env) error {
	if err := required(map[string]string{"contract": o.contract}); err != nil {
		return err
	}
	c, err := env.readContract(o.contract, env.Stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(env.Stdout, "valid: %s\n", c.ID)
	for _, p := range c.Network.Serve {
		fmt.Fprintf(env.Stdout, "  serves %s/%d: replies of connections that arrive on it are allowed\n", p.Proto, p.Port)
	}
	return nil
}

// readContract reads and strictly parses a contract file; an invalid one
// has its findings printed to findingsTo.
func (e *Env) readContract(path string, findingsTo io.Writer) (*spec.Contract, error) {
	data, err := e.readInput(path, spec.MaxContractBytes)
	if err != nil {
		return nil, readErr("contract", path, err)
	}
	c, err := spec.ParseContract(data)
	if err != nil {
		return nil, invalid(findingsTo, "contract "+path, err, "fix each listed field")
	}
	return c, nil
}
