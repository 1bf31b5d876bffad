package hostrun

import (
	"fmt"
	"strings"

	"github.com/gensee/gensee/spec"
)

// FixedPath is the PATH every host run gets: the run defines its
// environment, so the command digest is reproducible.
const FixedPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// RunEnv is the environment a host run executes with, in this order:
// PATH, HOME, LANG, USER, then each --env K=V in the order given. A K=V
// whose K is one of the four fixed keys replaces that value in place. A
// key given twice, an empty or non-portable key, or a NUL is an error.
func RunEnv(id Identity, extra []string) ([]string, error) {
	user := id.Name
	if user == "" {
		user = fmt.Sprint(id.UID)
	}
	env := []string{"PATH=" + FixedPath, "HOME=" + id.Home, "LANG=C.UTF-8", "USER=" + user}
	fixed := map[string]int{"PATH": 0, "HOME": 1, "LANG": 2, "USER": 3}
	seen := map[string]bool{}
	for _, kv := range extra {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !spec.ValidEnvName(k) {
			return nil, fmt.Errorf("--env %q: want NAME=VALUE with NAME of letters, digits and '_', not starting with a digit", kv)
		}
		if strings.ContainsRune(kv, 0) {
			return nil, fmt.Errorf("--env %s: the value holds a NUL byte", k)
		}
		if seen[k] {
			return nil, fmt.Errorf("--env %s is given twice; give each name once", k)
		}
		seen[k] = true
		if i, ok := fixed[k]; ok {
			env[i] = kv
			continue
		}
		env = append(env, kv)
	}
	return env, nil
}
