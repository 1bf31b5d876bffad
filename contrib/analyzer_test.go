package contrib

import (
	"bytes"
	"context"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/cmd/gensee/cli"
	"github.com/gensee/gensee/shim/config"
)

// flagValue is the value of --name in argv, or "".
func flagValue(argv []string, name string) string {
	if i := slices.Index(argv, "--"+name); i >= 0 && i+1 < len(argv) {
		return argv[i+1]
	}
	return ""
}

// checkServeArgv: argv is gensee analyzer serve with flags the CLI accepts
// (the command line parses up to a final --help), listening on the
// default socket.
func checkServeArgv(t *testing.T, where string, argv []string) {
	t.Helper()
	if len(argv) < 4 || !strings.HasSuffix(argv[0], "/gensee") || !slices.Equal(argv[1:3], []string{"analyzer", "serve"}) {
		t.Fatalf("%s: command %q, want gensee analyzer serve", where, argv)
	}
	var out, errb bytes.Buffer
	env := cli.OSEnv()
	env.Stdout, env.Stderr = &out, &errb
	if code := cli.Main(context.Background(), env, append(slices.Clone(argv[1:]), "--help")); code != cli.ExitOK {
		t.Errorf("%s: gensee %q --help: exit %d: %s", where, argv[1:], code, errb.String())
	}
	for _, f := range []string{"id", "rules", "key"} {
		if flagValue(argv, f) == "" {
			t.Errorf("%s: --%s is required", where, f)
		}
	}
	if l := flagValue(argv, "listen"); l != cli.DefaultAnalyzerSocket {
		t.Errorf("%s: --listen %q, want %s (selectors name it)", where, l, cli.DefaultAnalyzerSocket)
	}
	if c := flagValue(argv, "config"); c != config.DefaultPath {
		t.Errorf("%s: --config %q, want %s", where, c, config.DefaultPath)
	}
}

// TestContribSystemdAnalyzer: the unit runs gensee analyzer serve from
// where the kit installs gensee, as a simple long-running service that
// restarts on failure, writes nothing but its runtime directory (the
// socket's), reads the state dir read only, and has no capability and
// only unix sockets.
func TestContribSystemdAnalyzer(t *testing.T) {
	k := loadKit(t)
	svc := parseUnit(t, "gensee-analyzer.service", k.raw["systemd/gensee-analyzer.service"])
	for key, want := range map[string]string{
		"Type": "simple", "Restart": "on-failure", "RuntimeDirectory": "gensee", "RuntimeDirectoryMode": "0700",
		"ProtectSystem": "strict", "ReadOnlyPaths": config.DefaultStateDir, "NoNewPrivileges": "yes",
		"CapabilityBoundingSet": "", "RestrictAddressFamilies": "AF_UNIX", "PrivateNetwork": "yes", "User": "",
	} {
		if got := svc.one("[Service]", key); got != want {
			t.Errorf("[Service] %s=%q, want %q", key, got, want)
		}
	}
	if _, ok := svc["[Service]"]["ReadWritePaths"]; ok {
		t.Error("the analyzer writes nothing but its runtime directory: no ReadWritePaths")
	}
	if svc.one("[Install]", "WantedBy") != "multi-user.target" {
		t.Errorf("WantedBy %q", svc.one("[Install]", "WantedBy"))
	}
	argv := strings.Fields(svc.one("[Service]", "ExecStart"))
	if len(argv) > 0 && argv[0] != shimDir+"/gensee" {
		t.Errorf("ExecStart runs %s, want %s/gensee", argv[0], shimDir)
	}
	checkServeArgv(t, "gensee-analyzer.service", argv)
}

// TestContribAnalyzerDaemonSet: the DaemonSet runs gensee analyzer serve
// as root without capabilities on the installer's nodes, with the host's
// /run/gensee (the socket), /etc/gensee and the state dir (read only) at
// the same paths, and its key and rules from a Secret readable by root
// only.
func TestContribAnalyzerDaemonSet(t *testing.T) {
	objs := loadKit(t).objects(t)
	ds := objs["DaemonSet/"+installNS+"/gensee-analyzer"]
	if ds == nil {
		t.Fatal("no DaemonSet gensee-analyzer")
	}
	pod, c := nodeDaemonPod(t, objs, ds)
	argv := asStrings(at(c, "command"))
	checkServeArgv(t, "DaemonSet gensee-analyzer", argv)

	volumes := map[string]map[string]any{}
	for _, v := range list(pod, "volumes") {
		volumes[str(v, "name")] = v
	}
	mounts := map[string]map[string]any{} // mount path -> mount
	for _, m := range list(c, "volumeMounts") {
		mounts[str(m, "mountPath")] = m
		v := volumes[str(m, "name")]
		if hp := str(v, "hostPath", "path"); hp != "" && hp != str(m, "mountPath") {
			t.Errorf("host path %s mounted at %s: the config's paths are the host's", hp, str(m, "mountPath"))
		}
		if ro := at(m, "readOnly") == true; ro == (str(m, "mountPath") == "/run/gensee") {
			t.Errorf("mount %s readOnly=%v: only /run/gensee (the socket) is writable", str(m, "mountPath"), ro)
		}
	}
	for _, p := range []string{"/run/gensee", "/etc/gensee", config.DefaultStateDir} {
		if m := mounts[p]; m == nil || str(volumes[str(m, "name")], "hostPath", "path") != p {
			t.Errorf("host %s is not mounted", p)
		}
	}
	for _, f := range []string{"rules", "key"} {
		p := flagValue(argv, f)
		m := mounts[path.Dir(p)]
		if v := volumes[str(m, "name")]; str(v, "secret", "secretName") == "" || at(v, "secret", "defaultMode") != 0o400 {
			t.Errorf("--%s %s: want it in a Secret volume of defaultMode 0400, got %v", f, p, v)
		}
	}
}

// nodeDaemonPod checks what the kit's node daemons (the analyzer's, the
// node daemon's) share: the installer's nodeSelector and no
// runtimeClassName, one container, root without privilege escalation on a
// read-only root with every capability dropped. It returns the pod spec
// and the container.
func nodeDaemonPod(t *testing.T, objs map[string]map[string]any, ds map[string]any) (pod, c map[string]any) {
	t.Helper()
	pod, _ = at(ds, "spec", "template", "spec").(map[string]any)
	inst, _ := at(objs["DaemonSet/"+installNS+"/gensee-node-installer"], "spec", "template", "spec", "nodeSelector").(map[string]any)
	if sel, _ := at(pod, "nodeSelector").(map[string]any); !maps.Equal(sel, inst) || str(pod, "runtimeClassName") != "" {
		t.Errorf("nodeSelector %v (want the installer's %v), runtimeClassName %q (want none)", sel, inst, str(pod, "runtimeClassName"))
	}
	cs := list(pod, "containers")
	if len(cs) != 1 {
		t.Fatalf("want one container, got %d", len(cs))
	}
	c = cs[0]
	sc, _ := at(c, "securityContext").(map[string]any)
	if at(sc, "runAsUser") != 0 || at(sc, "allowPrivilegeEscalation") != false || at(sc, "readOnlyRootFilesystem") != true ||
		!slices.Equal(asStrings(at(sc, "capabilities", "drop")), []string{"ALL"}) || at(sc, "capabilities", "add") != nil {
		t.Errorf("securityContext %v: want root, no privilege escalation, read-only root, every capability dropped", sc)
	}
	return pod, c
}
