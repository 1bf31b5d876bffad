package contrib

import (
	"crypto/ed25519"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gensee/gensee/shim/config"
	"github.com/gensee/gensee/shim/service"
	"github.com/gensee/gensee/spec"
)

const installNS = "gensee-system"

// TestContribRuntimeClass: the RuntimeClass names the containerd handler,
// and schedules onto the nodes the installer serves.
func TestContribRuntimeClass(t *testing.T) {
	objs := loadKit(t).objects(t)
	rc := objs["RuntimeClass//"+handler]
	if rc == nil {
		t.Fatalf("no RuntimeClass %q", handler)
	}
	if str(rc, "apiVersion") != "node.k8s.io/v1" || str(rc, "handler") != handler {
		t.Errorf("RuntimeClass: apiVersion %q handler %q, want node.k8s.io/v1 and %q", str(rc, "apiVersion"), str(rc, "handler"), handler)
	}
	ds := objs["DaemonSet/"+installNS+"/gensee-node-installer"]
	want, _ := at(rc, "scheduling", "nodeSelector").(map[string]any)
	got, _ := at(ds, "spec", "template", "spec", "nodeSelector").(map[string]any)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("RuntimeClass schedules onto %s=%v, which the installer DaemonSet does not select (%v)", k, v, got)
		}
	}
}

// install is one `put SRC DST MODE` line of the installer script.
type install struct{ src, mode string }

// TestContribInstaller: the DaemonSet writes the shim where containerd
// finds it, the operator config, trust anchor (root, 0400), signed catalog
// and containerd drop-in at the runtime's default paths, from ConfigMap and
// Secret keys that exist and hold the kit's own files.
func TestContribInstaller(t *testing.T) {
	k := loadKit(t)
	objs := k.objects(t)
	if ns := objs["Namespace//"+installNS]; str(ns, "metadata", "labels", "pod-security.kubernetes.io/enforce") != "privileged" {
		t.Errorf("namespace %s must exist and admit hostPath volumes (pod-security privileged)", installNS)
	}
	ds := objs["DaemonSet/"+installNS+"/gensee-node-installer"]
	if ds == nil {
		t.Fatal("no DaemonSet gensee-node-installer")
	}
	pod, _ := at(ds, "spec", "template", "spec").(map[string]any)
	if str(pod, "runtimeClassName") != "" {
		t.Errorf("the installer must not run under the runtime it installs")
	}
	inits := list(pod, "initContainers")
	if len(inits) != 1 {
		t.Fatalf("want one init container, got %d", len(inits))
	}
	init := inits[0]
	volumes := map[string]map[string]any{}
	for _, v := range list(pod, "volumes") {
		volumes[str(v, "name")] = v
	}
	mounts := map[string]map[string]any{} // mount path -> volume
	for _, m := range list(init, "volumeMounts") {
		v := volumes[str(m, "name")]
		if v == nil {
			t.Errorf("volumeMount %s names no volume", str(m, "name"))
			continue
		}
		mounts[str(m, "mountPath")] = v
		if hp := str(v, "hostPath", "path"); hp != "" && str(m, "mountPath") != "/host"+hp {
			t.Errorf("host path %s mounted at %s; the script expects /host%s", hp, str(m, "mountPath"), hp)
		}
	}

	puts := installs(t, init)
	confd := ""
	for dst := range puts {
		if filepath.Dir(dst) == "/etc/containerd/conf.d" {
			confd = dst
		}
	}
	for _, w := range []struct {
		dst, mode string
		data      []byte // the kit file it must carry, if any
	}{
		{filepath.Join(shimDir, shimBinary(service.RuntimeName)), "0755", nil},
		{config.DefaultPath, "0600", k.raw["gensee/config.toml"]},
		{config.DefaultTrustAnchor, "0400", nil},
		{config.DefaultCatalog, "0644", nil},
		{confd, "0644", k.raw["containerd/gensee-runtime.toml"]},
	} {
		p, ok := puts[w.dst]
		if !ok || w.dst == "" {
			t.Errorf("the installer does not install %q (installs %v)", w.dst, slices.Sorted(maps.Keys(puts)))
			continue
		}
		if p.mode != w.mode {
			t.Errorf("%s installed with mode %s, want %s", w.dst, p.mode, w.mode)
		}
		data, ok := sourceData(objs, mounts, p.src)
		if !ok && !strings.HasPrefix(p.src, "/opt/gensee/bin/") {
			t.Errorf("%s: source %s is in no mounted ConfigMap or Secret key", w.dst, p.src)
		}
		if w.data != nil && data != string(w.data) {
			t.Errorf("%s: the ConfigMap copy (%s) differs from the kit's file; regenerate install/configmap.yaml", w.dst, p.src)
		}
	}
	for _, dir := range []string{shimDir, filepath.Dir(config.DefaultPath), config.DefaultStateDir, filepath.Dir(confd)} {
		if mounts["/host"+dir] == nil {
			t.Errorf("host directory %s is not mounted into the installer", dir)
		}
	}
	if sec := mounts["/anchor"]; sec == nil || at(sec, "secret", "defaultMode") != 0o400 {
		t.Errorf("trust anchor Secret volume: %v, want defaultMode 0400", sec)
	}
}

// installs parses the init container's `put SRC DST MODE` lines, keyed by
// host path.
func installs(t *testing.T, c map[string]any) map[string]install {
	t.Helper()
	var script strings.Builder
	for _, a := range append(asStrings(at(c, "command")), asStrings(at(c, "args"))...) {
		script.WriteString(a + "\n")
	}
	out := map[string]install{}
	for _, line := range strings.Split(script.String(), "\n") {
		f := strings.Fields(line)
		if len(f) == 4 && f[0] == "put" {
			if _, err := strconv.ParseUint(f[3], 8, 32); err != nil {
				t.Errorf("put %s: mode %q is not octal", f[2], f[3])
			}
			out[strings.TrimPrefix(f[2], "/host")] = install{src: f[1], mode: f[3]}
		}
	}
	return out
}

// sourceData returns the ConfigMap or Secret entry a path in the installer
// container reads.
func sourceData(objs map[string]map[string]any, mounts map[string]map[string]any, src string) (string, bool) {
	v := mounts[filepath.Dir(src)]
	key := filepath.Base(src)
	switch {
	case v == nil:
		return "", false
	case str(v, "configMap", "name") != "":
		s, ok := at(objs["ConfigMap/"+installNS+"/"+str(v, "configMap", "name")], "data", key).(string)
		return s, ok
	case str(v, "secret", "secretName") != "":
		s, ok := at(objs["Secret/"+installNS+"/"+str(v, "secret", "secretName")], "stringData", key).(string)
		return s, ok
	}
	return "", false
}

func asStrings(v any) []string {
	l, _ := v.([]any)
	var out []string
	for _, s := range l {
		if s, ok := s.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestContribSignedCatalog: the example signed catalog verifies under the
// example trust anchor and carries exactly the union of the example
// catalogs.
func TestContribSignedCatalog(t *testing.T) {
	k := loadKit(t)
	objs := k.objects(t)
	keyHex := str(objs["Secret/"+installNS+"/gensee-trust-anchor"], "stringData", filepath.Base(config.DefaultTrustAnchor))
	anchor, err := spec.ParsePublicKeyHex(keyHex)
	if err != nil {
		t.Fatalf("trust anchor Secret: %v", err)
	}
	envText := str(objs["ConfigMap/"+installNS+"/gensee-catalog"], "data", filepath.Base(config.DefaultCatalog))
	env, err := spec.ParseEnvelope([]byte(strings.TrimSpace(envText)))
	if err != nil {
		t.Fatalf("catalog ConfigMap: %v", err)
	}
	payload, err := env.Verify(spec.PayloadTypeCatalog, []ed25519.PublicKey{anchor}, 1)
	if err != nil {
		t.Fatalf("catalog ConfigMap does not verify under the Secret's anchor: %v", err)
	}
	got, err := spec.ParseCatalog(payload)
	if err != nil {
		t.Fatal(err)
	}
	want, err := mergeCatalogs(exampleCatalogs(t, k))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []*spec.Catalog{got, want} {
		slices.SortFunc(c.Analyzers, func(a, b spec.Analyzer) int { return strings.Compare(a.ID, b.ID) })
		slices.SortFunc(c.Selectors, func(a, b spec.Selector) int { return strings.Compare(a.ID, b.ID) })
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("install/catalog.yaml is not the signed union of contrib/catalogs; re-sign it (see the file's comment)")
	}
}

// TestContribExamples: example workloads use the RuntimeClass, run in a
// namespace some example catalog selects, and carry only gensee's own
// annotation keys.
func TestContribExamples(t *testing.T) {
	k := loadKit(t)
	namespaces := map[string]bool{}
	for _, c := range exampleCatalogs(t, k) {
		for _, s := range c.Selectors {
			namespaces[s.Match.K8sNamespace] = true
		}
	}
	known := []string{service.AnnotationInference, service.AnnotationObservation}
	n := 0
	for key, o := range k.objects(t) {
		var meta, pod map[string]any
		switch str(o, "kind") {
		case "Pod":
			meta, _ = o["metadata"].(map[string]any)
			pod, _ = o["spec"].(map[string]any)
		case "Job", "Deployment", "StatefulSet", "DaemonSet":
			meta, _ = at(o, "spec", "template", "metadata").(map[string]any)
			pod, _ = at(o, "spec", "template", "spec").(map[string]any)
		default:
			continue
		}
		if str(pod, "runtimeClassName") != handler {
			continue
		}
		n++
		if ns := str(o, "metadata", "namespace"); !namespaces[ns] {
			t.Errorf("%s: namespace %q is selected by no example catalog; its pods would be refused (no_selector)", key, ns)
		}
		annotations, _ := meta["annotations"].(map[string]any)
		for a := range annotations {
			if strings.HasPrefix(a, "io.gensee.") && !slices.Contains(known, a) {
				t.Errorf("%s: annotation %q is not one the runtime reads (%v)", key, a, known)
			}
		}
	}
	if n == 0 {
		t.Error("no example workload uses the gensee RuntimeClass")
	}
}
