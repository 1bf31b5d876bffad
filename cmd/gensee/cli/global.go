package cli

import (
	"flag"
	"fmt"
	"strings"
)

// Environment variables ctr reads for its global flags; gensee reads the
// same ones.
const (
	EnvAddress   = "CONTAINERD_ADDRESS"
	EnvNamespace = "CONTAINERD_NAMESPACE"
	// DefaultAddress is containerd's socket (ctr's default).
	DefaultAddress = "/run/containerd/containerd.sock"
	// DefaultNamespace is containerd's default namespace.
	DefaultNamespace = "default"
)

// globalOptions are ctr's global flags: given before the command
// (gensee -n k8s.io manifest show ID) or after it (every leaf accepts
// them), with CONTAINERD_ADDRESS and CONTAINERD_NAMESPACE as defaults.
type globalOptions struct {
	address, namespace, config string
	// namespaceSet: -n or $CONTAINERD_NAMESPACE named one (gensee ls and
	// gensee refusals then show only that namespace).
	namespaceSet bool
	debug        bool
	version      bool
}

func defaultGlobals(getenv func(string) string) *globalOptions {
	g := &globalOptions{address: DefaultAddress, namespace: DefaultNamespace}
	if getenv == nil {
		return g
	}
	if v := getenv(EnvAddress); v != "" {
		g.address = v
	}
	if v := getenv(EnvNamespace); v != "" {
		g.namespace, g.namespaceSet = v, true
	}
	return g
}

// globalValue is a string global flag; leaves get it too (persistent).
type globalValue struct {
	p   *string
	set *bool
}

func (v globalValue) String() string {
	if v.p == nil {
		return ""
	}
	return *v.p
}

func (v globalValue) Set(s string) error {
	*v.p = s
	if v.set != nil {
		*v.set = true
	}
	return nil
}

// globalBool is a bool global flag.
type globalBool struct{ p *bool }

func (v globalBool) String() string   { return fmt.Sprint(v.p != nil && *v.p) }
func (v globalBool) IsBoolFlag() bool { return true }
func (v globalBool) Set(s string) error {
	switch s {
	case "true", "1":
		*v.p = true
	case "false", "0":
		*v.p = false
	default:
		return fmt.Errorf("want true or false")
	}
	return nil
}

// globalFlag documents one global flag for help, docs and completion.
type globalFlag struct {
	names []string // long name first
	arg   string   // "" for a boolean
	usage string
	root  bool // only before the command
}

var globalFlags = []globalFlag{
	{[]string{"address", "a"}, "SOCK", "containerd socket `SOCK` (default $" + EnvAddress + ", else " + DefaultAddress + ")", false},
	{[]string{"namespace", "n"}, "NS", "containerd namespace `NS` (default $" + EnvNamespace + ", else " + DefaultNamespace + "; CRI uses k8s.io)", false},
	{[]string{"config"}, "F", "operator config `F` for every command that reads one (a command's own --config wins)", true},
	{[]string{"debug"}, "", "log debug lines to stderr (the operator config read, containerd client logs)", false},
	{[]string{"version", "v"}, "", "print the gensee version and exit", true},
}

// define adds the global flags bound to g to fs: all of them on the root,
// the persistent ones on a leaf, skipping any name the leaf defines itself.
func (g *globalOptions) define(fs *flag.FlagSet, root bool) {
	for _, gf := range globalFlags {
		if gf.root && !root {
			continue
		}
		for _, name := range gf.names {
			if fs.Lookup(name) != nil {
				continue
			}
			switch gf.names[0] {
			case "address":
				fs.Var(globalValue{p: &g.address}, name, gf.usage)
			case "namespace":
				fs.Var(globalValue{p: &g.namespace, set: &g.namespaceSet}, name, gf.usage)
			case "config":
				fs.Var(globalValue{p: &g.config}, name, gf.usage)
			case "debug":
				fs.Var(globalBool{&g.debug}, name, gf.usage)
			case "version":
				fs.Var(globalBool{&g.version}, name, gf.usage)
			}
		}
	}
}

// isGlobal reports whether f is a global flag added by define.
func isGlobal(f *flag.Flag) bool {
	switch f.Value.(type) {
	case globalValue, globalBool:
		return true
	}
	return false
}

// flagSpelling is "-n, --namespace NS" for help.
func (gf globalFlag) spelling() string {
	var names []string
	for _, n := range gf.names[1:] {
		names = append(names, "-"+n)
	}
	names = append(names, "--"+gf.names[0])
	s := strings.Join(names, ", ")
	if gf.arg != "" {
		s += " " + gf.arg
	}
	return s
}

// globalUsage is the usage text without the backquotes flag.UnquoteUsage
// reads the argument name from.
func (gf globalFlag) text() string { return strings.ReplaceAll(gf.usage, "`", "") }
