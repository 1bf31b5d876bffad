package cli

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/gensee/gensee/spec"
)

func TestManifestShowSummary(t *testing.T) {
	fx := newOpFixture(t)
	m := fx.m
	want := []string{
		"operation", fxOperation, fxNamespace + "/" + fxContainer,
		"ci-builds", m.Contract.Digest, "version 3",
		"safe_default: yes", "low_confidence", "asked the node analyzer, which gave no accepted inference (rejected)",
		"volatile env", "HOSTNAME, KUBERNETES_PORT",
		"init pid 4242", "/sys/fs/cgroup/builds/job-1",
		"exit status", "drained", "task 10m", "exceeded: no",
		"nftables", "mode allow_exact", "loopback deny", "gensee_0123456789ab, deleted at exit",
		"tcp 10.0.0.1:443", "udp [fd00::53]:53", "CAP_NET_RAW",
		"allowed 10 packets / 840 bytes; denied 3 packets / 180 bytes",
		"denied attempts", "not collected", "incomplete",
		"gate: fail (2 violation(s))", "invalid_json", "unexpected end of JSON input",
		`"/workspace/evil\x1b[31m\nname"`, // a container-chosen name is quoted, never printed raw
		"structured_result", "blob_set", "directory_tree", "workspace_patch",
		"sha256:" + m.Products[0].SHA256, m.Products[1].TreeDigest, m.Products[2].TreeDigest,
		"staged/out/result.json", "staged/out/blobs", "not staged",
		"unclaimed: 2", m.Unclaimed.Digest, "excluded: 1",
		"semantically verified: no", "promoted: no",
	}
	r := fx.run(t, "manifest", "show", "--container", fxContainer, "--namespace", fxNamespace)
	r.want(t, ExitOK, want, nil)
	if strings.Contains(r.stdout, "\x1b") {
		t.Errorf("summary prints a raw escape character:\n%s", r.stdout)
	}
	// The same operation by id, and the config by $GENSEE_CONFIG.
	h := std()
	h.env = map[string]string{"GENSEE_CONFIG": fx.config}
	h.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitOK, []string{fxOperation, "promoted: no"}, nil)
}

func TestManifestShowDeniedAttempts(t *testing.T) {
	fx := newOpFixture(t)
	fx.m.Observation.DeniedAttempts = spec.DeniedAttempts{Items: []spec.DeniedAttempt{{Target: "1.1.1.1:53", Proto: "udp"}}}
	fx.writeManifest(t)
	fx.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitOK, []string{"1 seen; the list is incomplete", "udp 1.1.1.1:53"}, nil)
	fx.m.Observation.DeniedAttempts = spec.DeniedAttempts{Complete: true}
	fx.writeManifest(t)
	fx.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitOK, []string{"none seen, and the log is complete"}, nil)
}

func TestManifestShowUnreadCounters(t *testing.T) {
	fx := newOpFixture(t)
	fx.m.Observation.Counters = spec.Counters{Error: "netlink: permission denied"}
	fx.m.Enforcement.Network.TableRemoved = ""
	fx.writeManifest(t)
	r := fx.run(t, "manifest", "show", "--operation", fxOperation)
	r.want(t, ExitOK, []string{"not read (netlink: permission denied): the zeros recorded mean nothing", "not recorded as removed"}, nil)
	if strings.Contains(r.stdout, "allowed 0 packets") {
		t.Errorf("unread counters print as zeros:\n%s", r.stdout)
	}
}

func TestManifestShowJSON(t *testing.T) {
	fx := newOpFixture(t)
	r := fx.run(t, "manifest", "show", "--container", fxContainer, "--namespace", fxNamespace, "--json")
	r.want(t, ExitOK, nil, nil)
	if stored := readFile(t, fx.dir+"/manifest.json"); r.stdout != string(stored) {
		t.Errorf("--json is not the stored manifest:\n%s\nstored:\n%s", r.stdout, stored)
	}
	got, err := spec.ParseManifest([]byte(r.stdout))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(*got, fx.m) {
		t.Errorf("round trip changed the manifest:\n%+v\nwant\n%+v", *got, fx.m)
	}
}

func TestManifestShowInToto(t *testing.T) {
	fx := newOpFixture(t)
	r := fx.run(t, "manifest", "show", "--operation", fxOperation, "--in-toto")
	r.want(t, ExitOK, nil, nil)
	var st struct {
		Type          string          `json:"_type"`
		PredicateType string          `json:"predicateType"`
		Predicate     json.RawMessage `json:"predicate"`
		Subject       []struct {
			Name   string            `json:"name"`
			Digest map[string]string `json:"digest"`
		} `json:"subject"`
	}
	if err := spec.DecodeStrict([]byte(r.stdout), &st, 1<<20); err != nil {
		t.Fatalf("statement: %v\n%s", err, r.stdout)
	}
	if st.Type != "https://in-toto.io/Statement/v1" || st.PredicateType != "https://gensee.dev/effect-manifest/v1" {
		t.Errorf("_type %q predicateType %q", st.Type, st.PredicateType)
	}
	got := map[string]string{}
	for _, s := range st.Subject {
		if len(s.Digest) != 1 {
			t.Errorf("subject %s digest %v, want only sha256", s.Name, s.Digest)
		}
		got[s.Name] = s.Digest["sha256"]
	}
	// Every staged regular file, none of the failed product, no directory
	// or symlink.
	if !reflect.DeepEqual(got, fx.sums) {
		t.Errorf("subjects %v\nwant %v", got, fx.sums)
	}
	pred, err := spec.ParseManifest(st.Predicate)
	if err != nil || !reflect.DeepEqual(*pred, fx.m) {
		t.Errorf("predicate is not the manifest: %v", err)
	}

	// Nothing staged: no subject, so no statement.
	for i := range fx.m.Products {
		fx.m.Products[i].Verdict, fx.m.Products[i].Staged = spec.VerdictFail, ""
	}
	fx.writeManifest(t)
	fx.run(t, "manifest", "show", "--operation", fxOperation, "--in-toto").want(t, ExitRefused, nil, []string{"at least one subject", "--json"})
}

func TestManifestRecordErrors(t *testing.T) {
	fx := newOpFixture(t)
	for _, cmd := range []string{"show", "verify"} {
		t.Run(cmd, func(t *testing.T) {
			fx.run(t, "manifest", cmd, "--container", "nope").want(t, ExitUsage, nil,
				[]string{"no operation recorded for container nope in namespace default", fx.state, "--namespace"})
			fx.run(t, "manifest", cmd, "--operation", strings.Repeat("f", 32)).want(t, ExitUsage, nil,
				[]string{"no directory", fx.state})
			fx.run(t, "manifest", cmd, "--operation", "../etc").want(t, ExitUsage, nil, []string{"malformed", "--help'"})
			fx.run(t, "manifest", cmd, "--container", "a/b").want(t, ExitUsage, nil, []string{"not a valid containerd identifier"})
		})
	}
	os.Rename(fx.dir+"/manifest.json", fx.dir+"/manifest.json.bak")
	fx.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitUsage, nil, []string{"does not exist yet", "the task exits"})
	os.Symlink(fx.dir+"/manifest.json.bak", fx.dir+"/manifest.json")
	fx.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitUsage, nil, []string{"too many levels of symbolic links"})
	os.Remove(fx.dir + "/manifest.json")

	// A manifest breaking the runtime's rules is refused with its findings.
	fx.m.Promoted = true
	fx.m.Products[0].SHA256 = "XYZ"
	fx.writeManifest(t)
	fx.run(t, "manifest", "show", "--operation", fxOperation, "--json").want(t, ExitRefused, nil,
		[]string{"promoted: must be false", "products[0].sha256", "is invalid"})
	fx.run(t, "manifest", "verify", "--operation", fxOperation).want(t, ExitRefused, nil, []string{"promoted: must be false"})
}

func TestManifestUsage(t *testing.T) {
	cases := []struct {
		args   []string
		stderr string
	}{
		{[]string{"show"}, "pass --container ID"},
		{[]string{"verify"}, "pass --container ID"},
		{[]string{"show", "--container", "a", "--operation", "b"}, "exclude each other"},
		{[]string{"show", "--operation", "b", "--namespace", "x"}, "--namespace goes with --container"},
		{[]string{"show", "--container", "a", "--json", "--in-toto"}, "exclude each other"},
	}
	for _, tc := range cases {
		r := std().run(t, append([]string{"manifest"}, tc.args...)...)
		r.want(t, ExitUsage, nil, []string{tc.stderr, "run 'gensee manifest " + tc.args[0] + " --help'"})
	}
}

// Served ports show on both sides: the ports under enforced, the counts
// (reverse-path drops included) under observed.
func TestManifestShowServed(t *testing.T) {
	fx := newOpFixture(t)
	fx.m.Enforcement.Network.Serve = []spec.ServeRule{{Proto: "udp", Port: 53}, {Proto: "tcp", Port: 8080}}
	fx.m.Observation.Served = &spec.Served{Packets: 30, Bytes: 3000, Connections: 4, ReversePathDropped: 2,
		Ports: []spec.ServedCount{{Proto: "tcp", Port: 8080, Packets: 20, Bytes: 2000}, {Proto: "udp", Port: 53, Packets: 10, Bytes: 1000}}}
	fx.writeManifest(t)
	fx.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitOK, []string{
		"serve", "53/udp, 8080/tcp (replies to peers that connected; a peer whose source does not route back",
		"served", "30 reply packets / 3000 bytes, 4 tcp connection(s) answered; 2 inbound packet(s) with a forged source dropped (reverse path)",
		"8080/tcp: 20 packets / 2000 bytes", "53/udp: 10 packets / 1000 bytes",
	}, nil)
	fx.m.Observation.Served = nil
	fx.writeManifest(t)
	fx.run(t, "manifest", "show", "--operation", fxOperation).want(t, ExitOK, []string{"served", "not counted"}, nil)
}
