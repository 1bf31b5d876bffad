package cli

import (
	"strings"
	"testing"
)

func TestHelpEveryCommand(t *testing.T) {
	paths := [][]string{{}}
	var walk func(c *Command, p []string)
	walk = func(c *Command, p []string) {
		for _, s := range c.Subs {
			q := append(append([]string{}, p...), s.Name)
			paths = append(paths, q)
			walk(s, q)
		}
	}
	walk(root(), nil)
	for _, p := range paths {
		for _, h := range []string{"--help", "-h"} {
			args := append(append([]string{}, p...), h)
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				std().run(t, args...).want(t, ExitOK, []string{"Usage:", "Exit codes:"}, nil)
			})
		}
	}
}

func TestHelpRootListsCommandsAndExitCodes(t *testing.T) {
	r := std().run(t, "--help")
	r.want(t, ExitOK, []string{
		"boundary validate", "boundary audit", "catalog keygen", "catalog sign", "catalog inspect",
		"inference sign", "inference make", "manifest show", "manifest verify", "observe", "version",
		"events", "attention list", "attention clear",
		"0  ok", "1  refused or invalid", "staged products do not match", "attention clear found no attention set",
		"2  usage error", "3  boundary audit", "4  boundary audit --operation: a control was defeated",
		"$GENSEE_CONFIG",
	}, nil)
}

func TestHelpLeafListsFlags(t *testing.T) {
	std().run(t, "help", "catalog", "inspect").want(t, ExitOK, []string{"--catalog F", "--trusted-key HEX|FILE", "--json"}, nil)
	std().run(t, "inference", "make", "--help").want(t, ExitOK, []string{"--class C", "--confidence BP", "--ttl D", "(default 30m0s)"}, nil)
	std().run(t, "manifest", "show", "--help").want(t, ExitOK, []string{"--container ID", "--namespace NS", "--operation ID", "--config F", "--json", "--in-toto", "https://gensee.dev/effect-manifest/v1"}, nil)
	std().run(t, "help", "manifest", "verify").want(t, ExitOK, []string{"--container ID", "--operation ID", "--config F", "verified: N files", "expected <value>, actual <value>"}, nil)
	std().run(t, "events", "--help").want(t, ExitOK, []string{"--follow", "--address SOCK", "--container ID", "--operation ID", "--json", "--config F",
		"N events dropped: the log reached its size bound", "SIGINT or SIGTERM: exit 0", "guidance"}, nil)
	std().run(t, "help", "attention", "list").want(t, ExitOK, []string{"--json", "--config F", "evidence"}, nil)
	std().run(t, "attention", "clear", "--help").want(t, ExitOK, []string{"--operation ID", "1 when no attention was set"}, nil)
	std().run(t, "boundary", "audit", "--help").want(t, ExitOK, []string{"--contract F", "--operation ID", "--container ID",
		"hit_a_wall", "defeated_a_control", "guidance gap", "gensee.operation-audit/v1", "4 when a control was defeated"}, nil)
}

func TestUsageErrors(t *testing.T) {
	cases := []struct {
		name   string
		args   []string
		stderr string
	}{
		{"no command", nil, "missing command"},
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"group without subcommand", []string{"catalog"}, "gensee: catalog: missing command"},
		{"unknown subcommand", []string{"catalog", "burn"}, `unknown command "burn"`},
		{"unknown flag", []string{"boundary", "validate", "--nope"}, "flag provided but not defined"},
		{"stray argument", []string{"boundary", "validate", "--contract", "a", "b"}, `unexpected argument "b"`},
		{"missing required flag", []string{"catalog", "sign", "--key", "k", "--in", "i"}, "--out is required"},
		{"observe without source", []string{"observe"}, "pass --bundle DIR"},
		{"observe bundle and rootfs", []string{"observe", "--bundle", "b", "--rootfs", "r"}, "--bundle excludes"},
		{"manifest without operation", []string{"manifest", "verify"}, "pass --container ID"},
		{"manifest group without subcommand", []string{"manifest"}, "gensee: manifest: missing command"},
		{"events without operation", []string{"events"}, "pass --container ID"},
		{"events address without follow", []string{"events", "--address", "/run/containerd/containerd.sock"}, "add --follow"},
		{"attention clear without operation", []string{"attention", "clear"}, "--operation is required"},
		{"audit contract and operation", []string{"boundary", "audit", "--contract", "c.json", "--operation", "x"}, "exclude each other"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := std().run(t, tc.args...)
			r.want(t, ExitUsage, nil, []string{tc.stderr, "--help'"})
		})
	}
}

func TestVersion(t *testing.T) {
	std().run(t, "version").want(t, ExitOK, []string{"gensee "}, nil)
}
