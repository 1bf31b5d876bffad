package cli

import (
	"context"
	"errors"
	"flag"
	"io"
	"maps"
	"slices"
	"strings"
)

// Command is one node of the command tree: a group (Subs) or a leaf
// (Setup). A leaf's Setup defines its flags on fs, bound to an options
// struct it owns, and returns the action to run once they parsed.
type Command struct {
	Name    string
	Summary string // one line, lower case, no final period
	Args    string // a leaf's synopsis after its path: "--contract F [--json]"
	Long    string // optional paragraphs printed after the synopsis
	Setup   func(fs *flag.FlagSet) Runner
	Subs    []*Command
	// Trailing lets a leaf take arguments after its flags (a command after
	// --); its Runner reads them with fs.Args().
	Trailing bool
	// UsageCode, when set, is the exit code of the leaf's usage errors
	// (boundary run: its refusal status, distinct from the command's own).
	UsageCode int
	// Positional names the flag a leaf's one positional argument sets, as
	// ctr takes ids: gensee manifest show ID is gensee manifest show
	// --container ID. Flags may come before or after it.
	Positional string
}

// Runner runs a leaf after its flags parsed.
type Runner func(ctx context.Context, env *Env) error

func (c *Command) sub(name string) *Command {
	for _, s := range c.Subs {
		if s.Name == name {
			return s
		}
	}
	return nil
}

func isHelpArg(a string) bool {
	switch a {
	case "-h", "-help", "--help", "help":
		return true
	}
	return false
}

// dispatch parses the global flags (ctr's: -a, -n, --debug; and
// --config, --version), then walks the rest down the tree from root and
// runs the leaf it names. Help asked for explicitly goes to stdout and
// succeeds; a missing or unknown command is a usage error.
func dispatch(ctx context.Context, env *Env, root *Command, args []string) error {
	if len(args) > 0 && args[0] == completeArg {
		return complete(env, root, args[1:])
	}
	g := defaultGlobals(env.Getenv)
	fs := quietFlagSet("gensee")
	g.define(fs, true)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeGroupHelp(env.Stdout, root, nil)
			return nil
		}
		return withPath(nil, errUsage("%v", err))
	}
	env.global = g
	if g.debug {
		env.enableDebug()
	}
	if g.version {
		writeVersion(env.Stdout)
		return nil
	}
	return walk(ctx, env, root, fs.Args())
}

func quietFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard) // dispatch reports parse errors itself
	fs.Usage = func() {}
	return fs
}

// walk finds the leaf args name below root and runs it.
func walk(ctx context.Context, env *Env, root *Command, args []string) error {
	cmd, path := root, []string{}
	for cmd.Setup == nil {
		if len(args) == 0 {
			writeGroupHelp(env.Stderr, cmd, path)
			return withPath(path, errUsage("missing command"))
		}
		a := args[0]
		if a == "help" && len(path) == 0 && len(args) > 1 {
			// gensee help boundary validate == gensee boundary validate --help
			return walk(ctx, env, root, append(append([]string{}, args[1:]...), "--help"))
		}
		if isHelpArg(a) {
			writeGroupHelp(env.Stdout, cmd, path)
			return nil
		}
		next := cmd.sub(a)
		if next == nil {
			return withPath(path, errUsage("unknown command %q", a))
		}
		cmd, path, args = next, append(path, a), args[1:]
	}
	fs, run := leafFlags(cmd, path, env.global)
	pos, err := parseLeaf(fs, args, cmd.Trailing)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			writeLeafHelp(env.Stdout, cmd, path, fs)
			return nil
		}
		return usageCode(cmd, withPath(path, errUsage("%v", err)))
	}
	if err := bindPositional(fs, cmd, pos); err != nil {
		return usageCode(cmd, withPath(path, err))
	}
	if env.global != nil && env.global.debug {
		env.enableDebug() // --debug given after the command
	}
	return usageCode(cmd, withPath(path, run(ctx, env)))
}

// leafFlags is a leaf's flag set: its own flags, --format next to --json,
// and the persistent global flags bound to g.
func leafFlags(cmd *Command, path []string, g *globalOptions) (*flag.FlagSet, Runner) {
	if g == nil {
		g = defaultGlobals(nil)
	}
	fs := quietFlagSet(strings.Join(path, " "))
	run := cmd.Setup(fs)
	addFormatFlag(fs)
	g.define(fs, false)
	return fs, run
}

// parseLeaf parses a leaf's args, letting flags follow positional
// arguments (gensee manifest show ID --json). A Trailing leaf's arguments
// stop flag parsing, as before: they are a command and its own flags.
// Everything after -- is positional.
func parseLeaf(fs *flag.FlagSet, args []string, trailing bool) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			return nil, err
		}
		rest := fs.Args()
		if trailing || len(rest) == 0 {
			return pos, nil
		}
		if used := len(args) - len(rest); used > 0 && args[used-1] == "--" {
			return append(pos, rest...), nil
		}
		pos, args = append(pos, rest[0]), rest[1:]
	}
}

// bindPositional sets the leaf's Positional flag from its one positional
// argument; any other is a usage error.
func bindPositional(fs *flag.FlagSet, cmd *Command, pos []string) error {
	if len(pos) == 0 {
		return nil
	}
	if cmd.Positional == "" || len(pos) > 1 {
		extra := pos[0]
		if cmd.Positional != "" {
			extra = pos[1]
		}
		return errUsage("unexpected argument %q (flags take the form --name value)", extra)
	}
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == cmd.Positional })
	if set {
		return errUsage("%q and --%s both name what to read: pass one", pos[0], cmd.Positional)
	}
	return fs.Set(cmd.Positional, pos[0])
}

// usageCode gives a leaf's usage errors its own exit code, if it has one.
func usageCode(cmd *Command, err error) error {
	var e *Error
	if cmd.UsageCode != 0 && errors.As(err, &e) && e.Code == ExitUsage {
		out := *e
		out.Code = cmd.UsageCode
		return &out
	}
	return err
}

// withPath prefixes the command path to what failed and turns usage errors
// into *Error with the --help hint.
func withPath(path []string, err error) error {
	if err == nil {
		return nil
	}
	var status exitStatus
	if errors.As(err, &status) {
		return err // a command's own status, passed through silently
	}
	p := strings.Join(path, " ")
	help := "run 'gensee --help'"
	if p != "" {
		help = "run 'gensee " + p + " --help'"
	}
	var u *usageError
	if errors.As(err, &u) {
		return fail(ExitUsage, p, u, help)
	}
	var e *Error
	if errors.As(err, &e) {
		out := *e
		out.What = joinWhat(p, e.What)
		return &out
	}
	return fail(ExitUsage, p, err, "")
}

func joinWhat(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	}
	return a + ": " + b
}

// required reports the first flag in names that was left empty.
func required(flags map[string]string) error {
	for _, name := range slices.Sorted(maps.Keys(flags)) {
		if flags[name] == "" {
			return errUsage("--%s is required", name)
		}
	}
	return nil
}
