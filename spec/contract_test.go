package spec

import (
	"errors"
	"strings"
	"testing"
)

// validContract is the docs/design.md §4 example, extended with an allow list.
func validContract() Contract {
	return Contract{
		ID: "offline-structured-result", Version: 1,
		Network:   Network{Mode: NetworkDenyAll},
		Workspace: "/workspace", Deadline: "15m",
		Products: []Product{{Class: ClassStructuredResult, Slot: "out/result.json", MaxBytes: 65536, Modes: []string{"0644"}}},
	}
}

func allowExact(rules ...AllowRule) Network {
	return Network{Mode: NetworkAllowExact, Allow: rules}
}

// wantErrors checks that err is exactly the listed "path: msg-substring" set.
func wantErrors(t *testing.T, err error, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Fatalf("unexpected errors:\n%v", err)
		}
		return
	}
	var ves ValidationErrors
	if !errors.As(err, &ves) || !errors.Is(err, ErrInvalid) {
		t.Fatalf("err = %v, want ValidationErrors", err)
	}
	if len(ves) != len(want) {
		t.Fatalf("got %d errors, want %d:\n%v", len(ves), len(want), err)
	}
	for i, w := range want {
		path, msg, _ := strings.Cut(w, ": ")
		if ves[i].Path != path || !strings.Contains(ves[i].Msg, msg) {
			t.Errorf("error %d = %q, want path %q with %q", i, ves[i].Error(), path, msg)
		}
	}
}

func TestContractValidate(t *testing.T) {
	tests := []struct {
		name string
		edit func(*Contract)
		want []string
	}{
		{"valid", func(*Contract) {}, nil},
		{"minimal", func(c *Contract) { c.Workspace, c.Deadline, c.Products = "", "", nil }, nil},
		{"missing id", func(c *Contract) { c.ID = "" }, []string{"id: contract id is required"}},
		{"bad id", func(c *Contract) { c.ID = "a b" }, []string{`id: "a b" is not a valid contract id`}},
		{"version 0", func(c *Contract) { c.Version = 0 }, []string{"version: is required"}},
		{"version negative", func(c *Contract) { c.Version = -2 }, []string{"version: -2: must be at least 1"}},
		{"mode missing", func(c *Contract) { c.Network.Mode = "" }, []string{"network.mode: is required"}},
		{"mode unknown", func(c *Contract) { c.Network.Mode = "allow_all" }, []string{`network.mode: "allow_all" is not a network mode`}},
		{"allow with deny_all", func(c *Contract) { c.Network.Allow = []AllowRule{{IP: "192.0.2.10", Proto: "tcp", Port: 443}} },
			[]string{`network.allow: is only allowed with mode "allow_exact"`}},
		{"allow_exact empty", func(c *Contract) { c.Network = allowExact() }, []string{"network.allow: allow_exact needs at least one tuple"}},
		{"allow_exact ok", func(c *Contract) {
			c.Network = allowExact(AllowRule{IP: "192.0.2.10", Proto: "tcp", Port: 443}, AllowRule{IP: "2001:db8::1", Proto: "udp", Port: 53},
				AllowRule{IP: "192.0.2.10", Proto: "icmp"}, AllowRule{IP: "2001:db8::1", Proto: "icmpv6"}, AllowRule{IP: "127.0.0.1", Proto: "tcp", Port: 8080})
			c.Network.Loopback = LoopbackAllow
		}, nil},
		{"loopback deny", func(c *Contract) { c.Network.Loopback = LoopbackDeny }, nil},
		{"loopback bad", func(c *Contract) { c.Network.Loopback = "yes" }, []string{`network.loopback: "yes" is not a loopback policy`}},
		{"hostname", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "example.com", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "example.com" is a hostname; allow_exact takes IP addresses only`}},
		{"cidr", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "10.0.0.0/8", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "10.0.0.0/8" is a CIDR`}},
		{"cidr /32", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "10.0.0.1/32", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "10.0.0.1/32" is a CIDR; allow_exact takes single IP addresses only (write "10.0.0.1")`}},
		{"range", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "10.0.0.1-10.0.0.9", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "10.0.0.1-10.0.0.9" is an address range`}},
		{"addr with port", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "10.0.0.1:443", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "10.0.0.1:443" includes a port`}},
		{"zone", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "fe80::1%eth0", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "fe80::1%eth0" has a zone`}},
		{"mapped", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "::ffff:192.0.2.1", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "::ffff:192.0.2.1" is an IPv4-mapped IPv6 address; write the IPv4 address "192.0.2.1"`}},
		{"unspecified", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "0.0.0.0", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "0.0.0.0" is the unspecified address`}},
		{"leading zeros", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "010.0.0.1", Proto: "tcp", Port: 443}) },
			[]string{`network.allow[0].ip: "010.0.0.1" is not an IP address`}},
		{"ip missing", func(c *Contract) { c.Network = allowExact(AllowRule{Proto: "tcp", Port: 443}) },
			[]string{"network.allow[0].ip: is required"}},
		{"proto missing", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "192.0.2.1", Port: 443}) },
			[]string{"network.allow[0].proto: is required"}},
		{"proto unknown", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "192.0.2.1", Proto: "sctp", Port: 443}) },
			[]string{`network.allow[0].proto: "sctp" is not a protocol`}},
		{"port missing", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "192.0.2.1", Proto: "udp"}) },
			[]string{"network.allow[0].port: is required for udp"}},
		{"port high", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "192.0.2.1", Proto: "tcp", Port: 65536}) },
			[]string{"network.allow[0].port: 65536 is out of range 1-65535"}},
		{"port negative", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "192.0.2.1", Proto: "tcp", Port: -1}) },
			[]string{"network.allow[0].port: -1 is out of range"}},
		{"icmp port", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "192.0.2.1", Proto: "icmp", Port: 8}) },
			[]string{"network.allow[0].port: must be absent for icmp"}},
		{"icmp v6", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "2001:db8::1", Proto: "icmp"}) },
			[]string{`network.allow[0].proto: "icmp" is for IPv4 addresses`}},
		{"icmpv6 v4", func(c *Contract) { c.Network = allowExact(AllowRule{IP: "192.0.2.1", Proto: "icmpv6"}) },
			[]string{`network.allow[0].proto: "icmpv6" is for IPv6 addresses`}},
		{"duplicate tuple", func(c *Contract) {
			c.Network = allowExact(AllowRule{IP: "2001:db8::1", Proto: "tcp", Port: 1}, AllowRule{IP: "2001:DB8:0::1", Proto: "tcp", Port: 1})
		}, []string{"network.allow[1]: duplicates network.allow[0]"}},
		{"several errors", func(c *Contract) {
			c.Network = allowExact(AllowRule{IP: "example.com", Proto: "tcp"}, AllowRule{IP: "192.0.2.1", Proto: "icmp", Port: 3})
		}, []string{"network.allow[0].ip: is a hostname", "network.allow[0].port: is required for tcp", "network.allow[1].port: must be absent"}},
		{"workspace relative", func(c *Contract) { c.Workspace = "workspace" }, []string{`workspace: "workspace" must be an absolute path`}},
		{"workspace unclean", func(c *Contract) { c.Workspace = "/a/../b/" }, []string{`workspace: "/a/../b/" is not a clean path; write "/b"`}},
		{"workspace root", func(c *Contract) { c.Workspace = "/" }, nil},
		{"deadline bad", func(c *Contract) { c.Deadline = "15 minutes" }, []string{`deadline: "15 minutes" is not a Go duration`}},
		{"deadline zero", func(c *Contract) { c.Deadline = "0s" }, []string{`deadline: "0s" must be positive`}},
		{"deadline signed", func(c *Contract) { c.Deadline = "-5m" }, []string{`deadline: "-5m" is not a Go duration`}},
		{"deadline overflow", func(c *Contract) { c.Deadline = "9999999999h" }, []string{`deadline: "9999999999h": time: invalid duration`}},
		{"deadline compound", func(c *Contract) { c.Deadline = "1h30m0.5s" }, nil},
		{"unclaimed fail", func(c *Contract) { c.Unclaimed = UnclaimedFail }, nil},
		{"unclaimed count", func(c *Contract) { c.Unclaimed = UnclaimedCount }, nil},
		{"unclaimed unknown", func(c *Contract) { c.Unclaimed = "Fail" }, []string{`unclaimed: "Fail" is not an unclaimed-change policy`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validContract()
			tt.edit(&c)
			wantErrors(t, c.Validate(), tt.want...)
		})
	}
}

func TestProductValidate(t *testing.T) {
	tests := []struct {
		name     string
		products []Product
		want     []string
	}{
		{"all classes", []Product{
			{Class: ClassBlob, Slot: "bin/app", Modes: []string{"0755", "0555"}},
			{Class: ClassBlobSet, Slot: "dist", MaxEntries: 10, MaxDepth: 1},
			{Class: ClassDirectoryTree, Slot: "site", MaxEntries: 1000, MaxDepth: 8, AllowSymlinks: true, MaxBytes: 1 << 30},
			{Class: ClassWorkspacePatch, Slot: "changes.patch", MaxBytes: 1 << 20},
			{Class: ClassStructuredResult, Slot: "out/result.json"},
			{Class: ClassEnvironmentSnapshot, Slot: "out/env"},
		}, nil},
		{"class missing", []Product{{Slot: "a"}}, []string{"products[0].class: is required"}},
		{"class unknown", []Product{{Class: "tarball", Slot: "a"}}, []string{`products[0].class: "tarball" is not a product class`}},
		{"slot missing", []Product{{Class: ClassBlob}}, []string{"products[0].slot: is required"}},
		{"slot absolute", []Product{{Class: ClassBlob, Slot: "/out"}}, []string{`products[0].slot: "/out" must be relative`}},
		{"slot dotdot", []Product{{Class: ClassBlob, Slot: "out/../../etc"}}, []string{`products[0].slot: "out/../../etc" contains ".."`}},
		{"slot dot", []Product{{Class: ClassBlob, Slot: "./out"}}, []string{`products[0].slot: "./out" has a "." segment`}},
		{"slot double slash", []Product{{Class: ClassBlob, Slot: "out//a"}}, []string{`products[0].slot: "out//a" has an empty segment`}},
		{"slot trailing slash", []Product{{Class: ClassBlobSet, Slot: "out/"}}, []string{`products[0].slot: "out/" has an empty segment`}},
		{"slot control", []Product{{Class: ClassBlob, Slot: "a\nb"}}, []string{"products[0].slot: \"a\\nb\" contains a control character"}},
		{"slot excluded", []Product{{Class: ClassBlob, Slot: "node_modules/x"}}, []string{`products[0].slot: "node_modules/x" is under "node_modules"`}},
		{"slot duplicate", []Product{{Class: ClassBlob, Slot: "a"}, {Class: ClassBlob, Slot: "a"}}, []string{`products[1].slot: "a" duplicates products[0].slot`}},
		{"slot nested", []Product{{Class: ClassBlob, Slot: "out/x"}, {Class: ClassDirectoryTree, Slot: "out"}},
			[]string{`products[1].slot: "out" contains products[0].slot "out/x"`}},
		{"slot inside", []Product{{Class: ClassDirectoryTree, Slot: "out"}, {Class: ClassBlob, Slot: "out/x"}},
			[]string{`products[1].slot: "out/x" is inside products[0].slot "out"`}},
		{"sibling prefix ok", []Product{{Class: ClassBlob, Slot: "out"}, {Class: ClassBlob, Slot: "output"}}, nil},
		{"negative limits", []Product{{Class: ClassDirectoryTree, Slot: "a", MaxEntries: -1, MaxBytes: -2, MaxDepth: -3}},
			[]string{"products[0].max_entries: -1 must not be negative", "products[0].max_bytes: -2", "products[0].max_depth: -3"}},
		{"single file extras", []Product{{Class: ClassBlob, Slot: "a", MaxEntries: 2, MaxDepth: 1, AllowSymlinks: true}},
			[]string{"products[0].max_entries: does not apply to blob", "products[0].max_depth: does not apply", "products[0].allow_symlinks: does not apply"}},
		{"mode bad", []Product{{Class: ClassBlob, Slot: "a", Modes: []string{"644", "0o644", "0800", "10644", "rw-r--r--"}}},
			[]string{`products[0].modes[0]: "644" is not an octal mode`, "products[0].modes[1]: not an octal", "products[0].modes[2]: not an octal", "products[0].modes[3]: not an octal", "products[0].modes[4]: not an octal"}},
		{"mode max", []Product{{Class: ClassBlob, Slot: "a", Modes: []string{"7777"}}}, nil},
		{"mode duplicate", []Product{{Class: ClassBlob, Slot: "a", Modes: []string{"0644", "0644"}}}, []string{`products[0].modes[1]: "0644" duplicates modes[0]`}},
		{"two patches", []Product{{Class: ClassWorkspacePatch, Slot: "a.patch"}, {Class: ClassWorkspacePatch, Slot: "b.patch"}},
			[]string{"products[1].class: a contract has at most one workspace_patch"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := validContract()
			c.Products = tt.products
			wantErrors(t, c.Validate(), tt.want...)
		})
	}
}

func TestParseContract(t *testing.T) {
	good := `{"id":"x","version":1,"network":{"mode":"deny_all"}}`
	c, err := ParseContract([]byte(good))
	if err != nil || c.ID != "x" || c.WorkspaceOrDefault() != "/" {
		t.Fatalf("ParseContract = %+v, %v", c, err)
	}
	if d, err := c.DeadlineDuration(); d != 0 || err != nil {
		t.Fatalf("DeadlineDuration = %v, %v", d, err)
	}
	if _, err := ParseContract([]byte(`{"id":"x","version":1,"network":{"mode":"deny_all"},"network":{"mode":"allow_exact"}}`)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("duplicate key: %v", err)
	}
	if _, err := ParseContract([]byte(`{"id":"x","version":1,"network":{"mode":"deny_all","allow":[{"ip":"example.com","proto":"tcp","port":443}]}}`)); !errors.Is(err, ErrInvalid) {
		t.Fatalf("invalid: %v", err)
	}
	big := `{"id":"` + strings.Repeat("a", MaxContractBytes) + `"}`
	if _, err := ParseContract([]byte(big)); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("too large: %v", err)
	}
}

func TestValidationErrorsFormat(t *testing.T) {
	c := Contract{Network: Network{Mode: "x"}}
	err := c.Validate()
	lines := strings.Split(err.Error(), "\n")
	if len(lines) != 3 || !strings.HasPrefix(lines[0], "id: ") || !strings.HasPrefix(lines[2], "network.mode: ") {
		t.Fatalf("Error() =\n%s", err)
	}
}
