package contrib

import (
	"slices"
	"strings"
	"testing"

	"github.com/gensee/gensee/node"
	"github.com/gensee/gensee/shim/config"
)

// checkNodeArgv: argv is gensee-node serve with flags it accepts, on the
// runtime's default state dir, the default listen address, Events on.
func checkNodeArgv(t *testing.T, where string, argv []string) node.Config {
	t.Helper()
	if len(argv) < 2 || !strings.HasSuffix(argv[0], "/gensee-node") || argv[1] != "serve" {
		t.Fatalf("%s: command %q, want gensee-node serve", where, argv)
	}
	var c node.Config
	if err := c.FlagSet().Parse(argv[2:]); err != nil {
		t.Fatalf("%s: %v", where, err)
	}
	if err := c.Check(); err != nil {
		t.Errorf("%s: %v", where, err)
	}
	if c.StateDir != config.DefaultStateDir || c.CursorDir != node.DefaultCursorDir || c.Listen != node.DefaultListen || !c.Events {
		t.Errorf("%s: %+v: want the default state dir, cursor dir and listen address, and --events (on in the kit)", where, c)
	}
	return c
}

// TestContribSystemdNode: the unit runs gensee-node serve from where the
// kit installs binaries, with the kubelet's credentials, reads the state
// dir read only and writes only its own state directory (the cursor),
// without a capability.
func TestContribSystemdNode(t *testing.T) {
	k := loadKit(t)
	svc := parseUnit(t, "gensee-node.service", k.raw["systemd/gensee-node.service"])
	for key, want := range map[string]string{
		"Type": "simple", "Restart": "on-failure", "StateDirectory": "gensee-node", "StateDirectoryMode": "0700",
		"ProtectSystem": "strict", "ReadOnlyPaths": config.DefaultStateDir, "NoNewPrivileges": "yes", "CapabilityBoundingSet": "", "User": "",
	} {
		if got := svc.one("[Service]", key); got != want {
			t.Errorf("[Service] %s=%q, want %q", key, got, want)
		}
	}
	if _, ok := svc["[Service]"]["ReadWritePaths"]; ok {
		t.Error("gensee-node writes nothing but its state directory: no ReadWritePaths")
	}
	argv := strings.Fields(svc.one("[Service]", "ExecStart"))
	if len(argv) > 0 && argv[0] != shimDir+"/gensee-node" {
		t.Errorf("ExecStart runs %s, want %s/gensee-node", argv[0], shimDir)
	}
	if c := checkNodeArgv(t, "gensee-node.service", argv); c.Kubeconfig != node.DefaultKubeconfig {
		t.Errorf("--kubeconfig %q, want the kubelet's %s", c.Kubeconfig, node.DefaultKubeconfig)
	}
}

// TestContribNodeDaemonSet: the DaemonSet runs gensee-node serve on the
// installer's nodes as root without capabilities, the state dir read only,
// as a ServiceAccount bound to a role that may create and patch Events
// and nothing else, with its node's name.
func TestContribNodeDaemonSet(t *testing.T) {
	objs := loadKit(t).objects(t)
	ds := objs["DaemonSet/"+installNS+"/gensee-node"]
	if ds == nil {
		t.Fatal("no DaemonSet gensee-node")
	}
	pod, c := nodeDaemonPod(t, objs, ds)
	if cfg := checkNodeArgv(t, "DaemonSet gensee-node", asStrings(at(c, "command"))); cfg.Kubeconfig != node.InCluster {
		t.Errorf("--kubeconfig %q, want %s (the ServiceAccount)", cfg.Kubeconfig, node.InCluster)
	}
	volumes := map[string]map[string]any{}
	for _, v := range list(pod, "volumes") {
		volumes[str(v, "name")] = v
	}
	for _, m := range list(c, "volumeMounts") {
		hp := str(volumes[str(m, "name")], "hostPath", "path")
		if hp != str(m, "mountPath") {
			t.Errorf("host path %s mounted at %s: the paths are the host's", hp, str(m, "mountPath"))
		}
		if ro := at(m, "readOnly") == true; ro != (hp == config.DefaultStateDir) {
			t.Errorf("mount %s readOnly=%v: the state dir read only, the cursor dir writable", hp, ro)
		}
	}
	sa := str(pod, "serviceAccountName")
	if objs["ServiceAccount/"+installNS+"/"+sa] == nil {
		t.Fatalf("serviceAccountName %q names no ServiceAccount of the kit", sa)
	}
	checkEventsRole(t, objs, sa)
}

// checkEventsRole: a ClusterRoleBinding binds sa to a ClusterRole whose
// only rule is create and patch of core events.
func checkEventsRole(t *testing.T, objs map[string]map[string]any, sa string) {
	t.Helper()
	for _, b := range objs {
		if str(b, "kind") != "ClusterRoleBinding" {
			continue
		}
		for _, s := range list(b, "subjects") {
			if str(s, "kind") != "ServiceAccount" || str(s, "name") != sa || str(s, "namespace") != installNS {
				continue
			}
			role := objs["ClusterRole//"+str(b, "roleRef", "name")]
			rules := list(role, "rules")
			if len(rules) != 1 || !slices.Equal(asStrings(at(rules[0], "resources")), []string{"events"}) ||
				!slices.Equal(asStrings(at(rules[0], "apiGroups")), []string{""}) ||
				!slices.Equal(asStrings(at(rules[0], "verbs")), []string{"create", "patch"}) {
				t.Errorf("ClusterRole %s: rules %v, want create and patch of core events only", str(b, "roleRef", "name"), rules)
			}
			return
		}
	}
	t.Errorf("no ClusterRoleBinding binds ServiceAccount %s/%s", installNS, sa)
}
