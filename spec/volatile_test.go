package spec

import (
	"slices"
	"strings"
	"testing"
)

// TestProtectedEnvSorted: the protected names and prefixes are kept
// sorted and distinct, so a reader finds a name and a reviewer a gap.
func TestProtectedEnvSorted(t *testing.T) {
	for name, list := range map[string][]string{"protectedEnv": protectedEnv, "protectedPrefixes": protectedPrefixes} {
		if !slices.IsSorted(list) || len(slices.Compact(slices.Clone(list))) != len(list) {
			t.Errorf("%s is not sorted and distinct", name)
		}
	}
}

// TestProtectedEnv: the loader's, libc's, shells', interpreters' and
// tools' code-loading variables are protected; data variables are not.
func TestProtectedEnv(t *testing.T) {
	for _, n := range []string{
		"PATH", "LD_PRELOAD", "LD_LIBRARY_PATH", "BASH_ENV", "BASH_FUNC_x%%", "PYTHONPATH", "PERL5OPT", "RUBYOPT", "RUBYLIB",
		"NODE_OPTIONS", "NODE_PATH", "NODE_EXTRA_CA_CERTS", "npm_config_script_shell", "NPM_CONFIG_NODE_OPTIONS",
		"OPENSSL_CONF", "OPENSSL_MODULES", "OPENSSL_ENGINES",
		"GIT_CONFIG", "GIT_CONFIG_GLOBAL", "GIT_CONFIG_COUNT", "GIT_CONFIG_KEY_0", "GIT_CONFIG_PARAMETERS",
		"GIT_SSH", "GIT_SSH_COMMAND", "GIT_EXEC_PATH", "GIT_ASKPASS", "SSH_ASKPASS", "GIT_DIR", "GIT_TEMPLATE_DIR",
		"LUA_INIT", "LUA_INIT_5_4", "LUA_PATH", "LUA_CPATH",
		"DOTNET_STARTUP_HOOKS", "CORECLR_PROFILER_PATH", "CORECLR_ENABLE_PROFILING",
		"PHPRC", "PHP_INI_SCAN_DIR", "ERL_AFLAGS", "ERL_ZFLAGS", "ERL_LIBS",
		"GOTOOLCHAIN", "GOENV", "GOFLAGS", "GODEBUG", "GOCACHEPROG", "GOSUMDB", "CGO_LDFLAGS", "CC",
		"GEM_HOME", "GEM_PATH", "BUNDLE_GEMFILE", "R_PROFILE", "R_PROFILE_USER", "R_LIBS_USER", "TCLLIBPATH",
		"PKG_CONFIG_PATH", "JAVA_TOOL_OPTIONS", "CLASSPATH", "MAKEFLAGS", "RUSTC_WRAPPER", "CARGO_BUILD_RUSTC_WRAPPER",
		"CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUNNER", "LESSOPEN", "GLIBC_TUNABLES", "MALLOC_ARENA_MAX",
	} {
		if !ProtectedEnv(n) {
			t.Errorf("%s is not protected", n)
		}
	}
	for _, n := range []string{"HOSTNAME", "HOME", "LANG", "KUBERNETES_SERVICE_HOST", "API_PORT_443_TCP", "GOPATH", "GOCACHE", "CARGO_SERVICE_HOST", "GIT_SERVICE_HOST", "TERM", "NODENAME"} {
		if ProtectedEnv(n) {
			t.Errorf("%s is protected", n)
		}
	}
}

// TestVolatileRefusesProtected: a volatile_env entry naming a protected
// variable, or a prefix pattern that would cover one, is refused; a
// pattern that matches one by suffix leaves it in the digest.
func TestVolatileRefusesProtected(t *testing.T) {
	for _, s := range []string{"OPENSSL_CONF", "GIT_SSH_COMMAND", "GIT_CONFIG_GLOBAL", "LUA_INIT", "NODE_ENV", "npm_config_cache",
		"GOTOOLCHAIN", "CORECLR_PROFILER", "GEM_HOME", "R_PROFILE_USER", "NODE*", "GIT_CONF*", "LUA*", "CORE*", "OPENSSL_*"} {
		if volatileProblem(s) == "" {
			t.Errorf("volatile_env %q is accepted", s)
		}
	}
	for _, s := range []string{"HOSTNAME", "*_SERVICE_HOST", "*_PORT_*", "POD_*", "GIT_COMMIT"} {
		if msg := volatileProblem(s); msg != "" {
			t.Errorf("volatile_env %q refused: %s", s, msg)
		}
	}
	kept, left := StableEnv([]string{"HOSTNAME=a", "GIT_SSH_COMMAND=x", "NODE_PORT=tcp://1", "WEB_PORT=tcp://2", "OPENSSL_CONF=/c"},
		[]string{"HOSTNAME", "*_PORT", "*_COMMAND", "*_CONF"})
	// NODE_PORT is a Service link (of a Service called "node"): left out.
	if want := []string{"GIT_SSH_COMMAND=x", "OPENSSL_CONF=/c"}; !slices.Equal(kept, want) || !slices.Equal(left, []string{"HOSTNAME", "NODE_PORT", "WEB_PORT"}) {
		t.Errorf("StableEnv kept %q left %q", kept, left)
	}
	if msg := volatileProblem("NODE_ENV"); !strings.Contains(msg, "never volatile") {
		t.Errorf("NODE_ENV: %q", msg)
	}
}

// TestCatalogRefusesProtectedVolatile: catalog validation refuses a
// selector whose volatile_env names a newly protected variable.
func TestCatalogRefusesProtectedVolatile(t *testing.T) {
	for _, name := range []string{"OPENSSL_CONF", "GIT_SSH_COMMAND", "NODE_ENV", "GOTOOLCHAIN"} {
		c := validCatalog()
		c.Selectors[0].VolatileEnv = []string{"HOSTNAME", name}
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "volatile_env") || !strings.Contains(err.Error(), name) {
			t.Errorf("volatile_env %s: %v", name, err)
		}
	}
}

// A name a prefix protects is not protected when it is a Service link the
// kubelet writes (a Service called "node" or "python-api"); the exact
// names the tools read stay protected.
func TestProtectedEnvServiceLinks(t *testing.T) {
	for _, n := range []string{"NODE_SERVICE_HOST", "NODE_SERVICE_PORT", "NODE_SERVICE_PORT_HTTP", "NODE_PORT", "NODE_PORT_80_TCP",
		"NODE_PORT_80_TCP_ADDR", "PYTHON_API_PORT_8080_UDP_PROTO", "LD_CACHE_SERVICE_HOST"} {
		if ProtectedEnv(n) {
			t.Errorf("ProtectedEnv(%q) = true; a Service link must be leavable out", n)
		}
	}
	for _, n := range []string{"NODE_OPTIONS", "LD_PRELOAD", "PYTHONPATH", "PATH", "NODE_PORT_80_TCP_EXTRA", "NODE_PORT_X_TCP",
		"LD_PORT_1_TCP_SHELL", "PYTHONSTARTUP"} {
		if !ProtectedEnv(n) {
			t.Errorf("ProtectedEnv(%q) = false; want protected", n)
		}
	}
	kept, left := StableEnv([]string{"NODE_SERVICE_HOST=10.0.0.1", "NODE_OPTIONS=--require /x.js", "LD_PRELOAD=/x.so"}, []string{"*_SERVICE_HOST", "NODE_*"})
	if len(left) != 1 || left[0] != "NODE_SERVICE_HOST" || len(kept) != 2 {
		t.Errorf("StableEnv: kept %q, left %q; want only the Service link left out", kept, left)
	}
}
