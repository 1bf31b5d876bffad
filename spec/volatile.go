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
// ProtectedEnv lists, which make a loader, libc, shell, interpreter or
// tool load or run other code. Validation refuses an entry that names
// one; a pattern that would also match one leaves it in.

// maxVolatileEntries bounds a selector's volatile_env list.
const maxVolatileEntries = 64

// protectedEnv are names no volatile_env entry leaves out of the command
// digest, and (PATH aside) that the reference analyzer classes only when
// a rule pins their exact entry: each makes a loader, libc, shell, interpreter or tool
// load or run code other than the executable's own, or picks the program
// it runs. protectedPrefixes are prefixes of such names. Both are sorted
// (TestProtectedEnvSorted).
var (
	protectedEnv = []string{
		"BASHOPTS",               // bash: shell options at start
		"BASH_ENV",               // bash: a file sourced by a non-interactive shell
		"BUNDLE_APP_CONFIG",      // bundler: its config directory
		"BUNDLE_GEMFILE",         // bundler: the Gemfile (Ruby code) it loads
		"BUNDLE_PATH",            // bundler: where gems are loaded from
		"CC",                     // go, make, cgo: the C compiler run
		"CDPATH",                 // shells: where cd resolves
		"CLASSPATH",              // java: where classes are loaded from
		"COMPILER_PATH",          // gcc: where its subprograms are found
		"CXX",                    // go, make, cgo: the C++ compiler run
		"DOTNET_ADDITIONAL_DEPS", // .NET: extra assemblies
		"DOTNET_ROOT",            // .NET: the runtime loaded
		"DOTNET_STARTUP_HOOKS",   // .NET: assemblies run before Main
		"EDITOR",                 // git, others: a command run
		"ELIXIR_ERL_OPTIONS",     // elixir: erl flags
		"ENV",                    // sh: a file sourced by an interactive shell
		"ERL_AFLAGS",             // erl: emulator flags (-eval, -pa)
		"ERL_FLAGS",              // erl: emulator flags
		"ERL_LIBS",               // erl: where applications are loaded from
		"ERL_ZFLAGS",             // erl: emulator flags
		"GCC_EXEC_PREFIX",        // gcc: where its subprograms are found
		"GCONV_PATH",             // glibc: iconv modules loaded
		"GEMRC",                  // rubygems: its config
		"GEM_HOME",               // rubygems: where gems are loaded from
		"GEM_PATH",               // rubygems: where gems are loaded from
		"GIT_ALLOW_PROTOCOL",     // git: lets ext:: run commands
		"GIT_ASKPASS",            // git: a program run for credentials
		"GIT_COMMON_DIR",         // git: a repository whose config runs commands
		"GIT_DIR",                // git: a repository whose config runs commands
		"GIT_EDITOR",             // git: a command run
		"GIT_EXEC_PATH",          // git: where its subcommands are found
		"GIT_EXTERNAL_DIFF",      // git: a command run
		"GIT_PAGER",              // git: a command run
		"GIT_PROXY_COMMAND",      // git: a command run
		"GIT_SEQUENCE_EDITOR",    // git: a command run
		"GIT_SSH",                // git: the ssh program run
		"GIT_SSH_COMMAND",        // git: the ssh command run
		"GIT_TEMPLATE_DIR",       // git: hooks copied into new repositories
		"GLIBC_TUNABLES",         // glibc: allocator and loader tunables
		"GLOBIGNORE",             // bash: globbing
		"GNUMAKEFLAGS",           // make: flags and variables
		"GOCACHEPROG",            // go: a program run as the build cache
		"GODEBUG",                // go: runtime behaviour
		"GOENV",                  // go: a file of go env settings (GOFLAGS, GOTOOLCHAIN)
		"GOFLAGS",                // go: flags such as -toolexec
		"GOINSECURE",             // go: modules fetched without verification
		"GONOSUMCHECK",           // go: modules not checked against the sum db
		"GONOSUMDB",              // go: modules not checked against the sum db
		"GOPRIVATE",              // go: modules not checked against the sum db
		"GOROOT",                 // go: the toolchain run
		"GOSUMDB",                // go: the checksum database (off: none)
		"GOTOOLCHAIN",            // go: another toolchain downloaded and run
		"GRADLE_OPTS",            // gradle: JVM flags
		"HOSTALIASES",            // glibc: host name aliases
		"IFS",                    // shells: word splitting
		"JAVA_HOME",              // java launchers (mvn, gradle): the JVM run
		"JAVA_OPTS",              // java launchers: JVM flags (-javaagent)
		"JAVA_TOOL_OPTIONS",      // java: JVM flags (-javaagent)
		"JDK_JAVA_OPTIONS",       // java: JVM flags
		"LESSCLOSE",              // less: a command run
		"LESSOPEN",               // less: an input preprocessor run
		"LOCALDOMAIN",            // glibc: resolver search domains
		"LOCPATH",                // glibc: locale data loaded
		"MAKEFILES",              // make: makefiles read first
		"MAKEFLAGS",              // make: flags and variables (SHELL)
		"MAVEN_OPTS",             // maven: JVM flags
		"NLSPATH",                // libc: message catalogs loaded
		"OPENSSL_CONF",           // openssl: config that loads engines and providers
		"OPENSSL_ENGINES",        // openssl: where engines are loaded from
		"OPENSSL_MODULES",        // openssl: where providers are loaded from
		"PAGER",                  // many tools: a command run
		"PATH",                   // exec: which program a name runs
		"PERLLIB",                // perl: where modules are loaded from
		"PHPRC",                  // php: the php.ini (auto_prepend_file, extensions)
		"PHP_INI_SCAN_DIR",       // php: more ini files
		"PIP_CONFIG_FILE",        // pip: its config
		"PIP_EXTRA_INDEX_URL",    // pip: where packages are fetched
		"PIP_FIND_LINKS",         // pip: where packages are fetched
		"PIP_INDEX_URL",          // pip: where packages are fetched
		"PKG_CONFIG_LIBDIR",      // pkg-config: .pc files (compiler and linker flags)
		"PKG_CONFIG_PATH",        // pkg-config: .pc files (compiler and linker flags)
		"PROMPT_COMMAND",         // bash: a command run
		"PS4",                    // bash: expanded (runs substitutions) under -x
		"RES_OPTIONS",            // glibc: resolver options
		"RUBYLIB",                // ruby: where libraries are loaded from
		"RUBYOPT",                // ruby: flags (-r loads a library)
		"RUSTDOC",                // cargo: the rustdoc run
		"RUSTFLAGS",              // cargo: rustc flags (-C linker)
		"SHELLOPTS",              // bash: shell options at start
		"SSH_ASKPASS",            // ssh: a program run for passphrases
		"TCLLIBPATH",             // tcl: where packages are loaded from
		"TZDIR",                  // glibc: time zone data loaded
		"VISUAL",                 // many tools: a command run
		"ZDOTDIR",                // zsh: where its startup files are
		"_JAVA_OPTIONS",          // java: JVM flags
	}
	protectedPrefixes = []string{
		"BASH_FUNC_",        // bash: exported functions
		"CARGO_BUILD_",      // cargo: build config (rustc, rustc-wrapper)
		"CARGO_HOME",        // cargo: its config and registry
		"CARGO_REGISTRIES_", // cargo: where crates are fetched
		"CARGO_SOURCE_",     // cargo: source replacement
		"CARGO_TARGET_",     // cargo: per-target linker and runner
		"CGO_",              // cgo: compiler and linker flags
		"CORECLR_",          // .NET: a profiler library loaded
		"GIT_CONFIG",        // git: config (GIT_CONFIG_GLOBAL, _COUNT, _KEY_n, _PARAMETERS)
		"LD_",               // the dynamic loader
		"LUA_",              // lua: LUA_INIT (code run), LUA_PATH, LUA_CPATH
		"MALLOC_",           // glibc: allocator
		"NODE_",             // node: NODE_OPTIONS (--require), NODE_PATH, ...
		"NPM_CONFIG_",       // npm: config (script-shell, node-options)
		"PERL5",             // perl: PERL5LIB, PERL5OPT (-M loads a module)
		"PYTHON",            // python: PYTHONPATH, PYTHONSTARTUP, PYTHONHOME
		"RUSTC",             // cargo: RUSTC, RUSTC_WRAPPER, RUSTC_WORKSPACE_WRAPPER
		"R_ENVIRON",         // R: a file of variables (R_PROFILE)
		"R_LIBS",            // R: where packages are loaded from
		"R_PROFILE",         // R: R code run at start
		"npm_config_",       // npm: config (script-shell, node-options)
	}
)

// ProtectedEnv reports whether name is never left out of a command digest.
// A name only a prefix protects is not protected when it has the shape of
// a Kubernetes Service link (serviceLink): a Service called "node" or
// "python-api" gives every pod of its namespace NODE_SERVICE_HOST or
// PYTHON_API_PORT_80_TCP, which no loader or interpreter reads (they read
// their own exact names), and which volatile_env must be able to leave out.
func ProtectedEnv(name string) bool {
	if slices.Contains(protectedEnv, name) {
		return true
	}
	if serviceLink(name) {
		return false
	}
	for _, p := range protectedPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	return false
}

// serviceLink reports whether name has the shape of a variable the
// kubelet writes for a Service (<SVC>_SERVICE_HOST, <SVC>_SERVICE_PORT,
// <SVC>_SERVICE_PORT_<PORTNAME>, <SVC>_PORT, <SVC>_PORT_<N>_<PROTO> and
// its _PROTO, _PORT, _ADDR), with <SVC> non-empty.
func serviceLink(name string) bool {
	for _, suf := range []string{"_SERVICE_HOST", "_SERVICE_PORT", "_PORT"} {
		if i := strings.LastIndex(name, suf); i > 0 && i+len(suf) == len(name) {
			return true
		}
	}
	if i := strings.Index(name, "_SERVICE_PORT_"); i > 0 && i+len("_SERVICE_PORT_") < len(name) {
		return true
	}
	i := strings.LastIndex(name, "_PORT_")
	if i <= 0 {
		return false
	}
	rest := strings.Split(name[i+len("_PORT_"):], "_") // N, PROTO[, PROTO|PORT|ADDR]
	if len(rest) < 2 || len(rest) > 3 || !allDigits(rest[0]) || !slices.Contains([]string{"TCP", "UDP", "SCTP"}, rest[1]) {
		return false
	}
	return len(rest) == 2 || slices.Contains([]string{"PROTO", "PORT", "ADDR"}, rest[2])
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
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
	if !(ValidEnvName(lit) && len(lit) <= 128) && !(strings.HasPrefix(s, "*") && validEnvTail(lit)) {
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

// ValidEnvName reports whether s is a portable environment variable name:
// letters, digits and '_', not starting with a digit.
func ValidEnvName(s string) bool {
	return s != "" && (s[0] < '0' || s[0] > '9') && envChars(s)
}

// validEnvTail reports whether s is 1-128 letters, digits and '_' (the
// literal of a volatile_env pattern after a leading '*').
func validEnvTail(s string) bool { return s != "" && len(s) <= 128 && envChars(s) }

func envChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9') {
			return false
		}
	}
	return true
}
