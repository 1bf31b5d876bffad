package spec

import (
	"slices"
	"strings"
)

// Volatile environment variables (docs/design.md §3.2).
//
// A selector may name environment variables whose values differ from one
// run of the same workload to the next (CRI's HOSTNAME, the kubelet's
// Service links): they are left out of the command digest, so an
// observation, and an inference bound to it, stays the same across the
// replicas of a Deployment. The observation records the names left out.
//
// Some names are never left out, whatever a selector lists: PATH (it picks
// the executable), every LD_* (the dynamic loader's), and the variables
// ProtectedEnv lists, which make a loader, libc, shell or interpreter load
// or run other code. Validation refuses an entry that names one; a pattern
// that would also match one leaves it in.

// maxVolatileEntries bounds a selector's volatile_env list.
const maxVolatileEntries = 64

// protectedEnv are names no volatile_env entry leaves out of the command
// digest; protectedPrefixes are prefixes of such names.
var (
	protectedEnv = []string{
		"PATH", "BASH_ENV", "ENV", "SHELLOPTS", "BASHOPTS", "IFS", "PS4", "CDPATH", "GLOBIGNORE", "PROMPT_COMMAND",
		"GCONV_PATH", "GLIBC_TUNABLES", "LOCPATH", "NLSPATH", "HOSTALIASES", "RES_OPTIONS", "LOCALDOMAIN", "TZDIR",
		"PERLLIB", "RUBYLIB", "RUBYOPT", "NODE_OPTIONS", "NODE_PATH", "CLASSPATH",
		"JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "GODEBUG", "GOFLAGS",
	}
	protectedPrefixes = []string{"LD_", "PYTHON", "PERL5", "MALLOC_", "BASH_FUNC_"}
)

// ProtectedEnv reports whether name is never left out of a command digest.
func ProtectedEnv(name string) bool {
	if slices.Contains(protectedEnv, name) {
		return true
	}
	for _, p := range protectedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// VolatileMatch reports whether the environment variable name matches the
// volatile_env entry pattern: an exact name, "PREFIX*", "*SUFFIX" or
// "*INFIX*". It does not consult ProtectedEnv (StableEnv does).
func VolatileMatch(pattern, name string) bool {
	lead := strings.HasPrefix(pattern, "*")
	trail := len(pattern) > 1 && strings.HasSuffix(pattern, "*")
	lit := strings.TrimSuffix(strings.TrimPrefix(pattern, "*"), "*")
	switch {
	case lead && trail:
		return strings.Contains(name, lit)
	case lead:
		return strings.HasSuffix(name, lit)
	case trail:
		return strings.HasPrefix(name, lit)
	}
	return name == pattern
}

// StableEnv splits env ("NAME=value" entries, in order) into the entries a
// command digest covers and the sorted, distinct names left out: those a
// pattern of volatile matches and ProtectedEnv does not protect. An entry
// without '=' is all name. With no patterns, env is returned unchanged.
func StableEnv(env, volatile []string) (kept, left []string) {
	if len(volatile) == 0 {
		return env, nil
	}
	kept = make([]string, 0, len(env))
	for _, e := range env {
		name, _, _ := strings.Cut(e, "=")
		if !ProtectedEnv(name) && slices.ContainsFunc(volatile, func(p string) bool { return VolatileMatch(p, name) }) {
			left = append(left, name)
			continue
		}
		kept = append(kept, e)
	}
	slices.Sort(left)
	return kept, slices.Compact(left)
}

// checkVolatile validates a selector's volatile_env entries.
func checkVolatile(p problems, entries []string) {
	if len(entries) > maxVolatileEntries {
		p.addf("volatile_env", "has %d entries; at most %d", len(entries), maxVolatileEntries)
	}
	checkUnique(p, "volatile_env", entries, func(ep problems, s string) {
		if msg := volatileProblem(s); msg != "" {
			ep.add("", msg)
		}
	})
}

// volatileProblem says why s is not a usable volatile_env entry, or "".
func volatileProblem(s string) string {
	lit := strings.TrimSuffix(strings.TrimPrefix(s, "*"), "*")
	if !validEnvName(lit) && !(strings.HasPrefix(s, "*") && validEnvTail(lit)) {
		return "\"" + truncate(s, 80) + "\" is not an environment variable name (letters, digits, '_', not starting with a digit), optionally with one leading and/or one trailing '*'"
	}
	if len(lit) < 2 && s != lit {
		return "\"" + truncate(s, 80) + "\" matches too much: a pattern needs at least 2 literal characters"
	}
	if !strings.HasPrefix(s, "*") && !strings.HasSuffix(s, "*") && ProtectedEnv(s) {
		return "\"" + s + "\" is never volatile: PATH, LD_* and the names that make a loader, shell or interpreter run other code (spec.ProtectedEnv) stay in the command digest"
	}
	if strings.HasSuffix(s, "*") && !strings.HasPrefix(s, "*") {
		for _, pre := range protectedPrefixes {
			if strings.HasPrefix(pre, lit) || strings.HasPrefix(lit, pre) {
				return "\"" + s + "\" would cover " + pre + "*, which is never volatile"
			}
		}
		for _, n := range protectedEnv {
			if strings.HasPrefix(n, lit) {
				return "\"" + s + "\" would cover " + n + ", which is never volatile"
			}
		}
	}
	return ""
}

// validEnvName reports whether s is a portable environment variable name.
func validEnvName(s string) bool {
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		return false
	}
	return validEnvTail(s)
}

// validEnvTail reports whether s is non-empty letters, digits and '_'.
func validEnvTail(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
