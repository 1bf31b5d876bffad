package admission

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gensee/gensee/spec"
)

// selectorFor returns the one selector whose set fields all equal the
// facts. A selector that sets no field matches nothing (no wildcards).
func selectorFor(cat *spec.Catalog, f Facts) (*spec.Selector, *failure) {
	var hits []*spec.Selector
	for i := range cat.Selectors {
		if matches(cat.Selectors[i].Match, f) {
			hits = append(hits, &cat.Selectors[i])
		}
	}
	switch len(hits) {
	case 1:
		return hits[0], nil
	case 0:
		return nil, fail(ReasonNoSelector, "no selector of catalog version "+fmt.Sprint(cat.Version)+" matches "+describeFacts(f),
			"add a selector for these facts to the catalog, or run the container where a selector applies")
	}
	ids := make([]string, len(hits))
	for i, s := range hits {
		ids[i] = fmt.Sprintf("%q", s.ID)
	}
	return nil, fail(ReasonAmbiguousSelector, "selectors "+strings.Join(ids, ", ")+" all match "+describeFacts(f),
		"make the catalog's selectors disjoint (e.g. set k8s_namespace on each CRI selector); exactly one may match")
}

func matches(m spec.SelectorMatch, f Facts) bool {
	set := false
	for _, p := range [][2]string{
		{m.ContainerdNamespace, f.ContainerdNamespace},
		{m.Runtime, f.Runtime},
		{m.K8sNamespace, f.K8sNamespace},
	} {
		if p[0] == "" {
			continue
		}
		if p[0] != p[1] {
			return false
		}
		set = true
	}
	if m.User != "" {
		if !matchUser(m.User, f.User) {
			return false
		}
		set = true
	}
	return set
}

// matchUser: a selector's user names the invoking user by login name or by
// decimal uid.
func matchUser(want string, u *User) bool {
	if u == nil {
		return false
	}
	return want == strconv.FormatUint(uint64(u.UID), 10) || (u.Name != "" && want == u.Name)
}

func describeFacts(f Facts) string {
	s := fmt.Sprintf("containerd namespace %q, runtime %q", f.ContainerdNamespace, f.Runtime)
	if f.User != nil && f.ContainerdNamespace == "" {
		s = fmt.Sprintf("runtime %q", f.Runtime) // a host command has no containerd namespace
	}
	if f.K8sNamespace != "" {
		s += fmt.Sprintf(", k8s namespace %q", f.K8sNamespace)
	}
	if f.User != nil {
		s += fmt.Sprintf(", user %q (uid %d)", f.User.Name, f.User.UID)
	}
	return s
}
