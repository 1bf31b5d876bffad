package gate

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"
)

// CheckEnv validates an environment_snapshot and returns its key count.
// Two forms are accepted, told apart by the first non-space byte:
//
//   - a flat JSON object whose values are all strings ("{...}"), checked
//     as strictly as CheckJSON (duplicates, UTF-8, trailing data);
//   - KEY=VALUE lines separated by "\n" (a final newline is optional); the
//     value is everything after the first '=' and may be empty; NUL and
//     "\r" are refused, as are empty lines.
//
// Keys must match [A-Za-z_][A-Za-z0-9_]* (rule bad_env_key) and be unique
// (duplicate_key); more than maxKeys keys is over_max_entries.
func CheckEnv(r io.Reader, maxKeys int64) (int64, *Violation) {
	br := bufio.NewReaderSize(&utf8Reader{r: r}, 64<<10)
	for n := 1; ; n++ {
		b, err := br.Peek(n)
		if len(b) < n {
			if n == 1 && err == io.EOF {
				return 0, nil // empty snapshot: no variables
			}
			return envLines(br, maxKeys) // rejects whitespace-only input
		}
		switch b[n-1] {
		case ' ', '\t', '\r', '\n':
			continue
		case '{':
			return envJSON(br, maxKeys)
		}
		return envLines(br, maxKeys)
	}
}

func envJSON(r io.Reader, maxKeys int64) (int64, *Violation) {
	var raw bytes.Buffer
	if v := CheckJSON(io.TeeReader(r, &raw)); v != nil {
		return 0, v
	}
	var m map[string]any
	if err := json.Unmarshal(raw.Bytes(), &m); err != nil {
		return 0, &Violation{Rule: RuleInvalidEnv, Detail: "want a flat JSON object of strings: " + err.Error()}
	}
	if int64(len(m)) > maxKeys {
		return 0, &Violation{Rule: RuleOverMaxEntries, Detail: fmt.Sprintf("more than %d variables", maxKeys)}
	}
	for k, v := range m {
		if !envKey(k) {
			return 0, &Violation{Rule: RuleBadEnvKey, Detail: fmt.Sprintf("key %q is not [A-Za-z_][A-Za-z0-9_]*", k)}
		}
		if _, ok := v.(string); !ok {
			return 0, &Violation{Rule: RuleInvalidEnv, Detail: fmt.Sprintf("value of %q is not a string", k)}
		}
	}
	return int64(len(m)), nil
}

func envLines(r *bufio.Reader, maxKeys int64) (int64, *Violation) {
	seen := map[string]bool{}
	for lineNo := 1; ; lineNo++ {
		line, err := r.ReadString('\n')
		if err != nil && err != io.EOF {
			return 0, &Violation{Rule: RuleInvalidEnv, Detail: err.Error()}
		}
		if line == "" && err == io.EOF {
			return int64(len(seen)), nil
		}
		line = strings.TrimSuffix(line, "\n")
		key, _, ok := strings.Cut(line, "=")
		switch {
		case line == "":
			return 0, &Violation{Rule: RuleInvalidEnv, Detail: fmt.Sprintf("line %d is empty", lineNo)}
		case strings.ContainsAny(line, "\x00\r"):
			return 0, &Violation{Rule: RuleInvalidEnv, Detail: fmt.Sprintf("line %d contains NUL or CR", lineNo)}
		case !ok:
			return 0, &Violation{Rule: RuleInvalidEnv, Detail: fmt.Sprintf("line %d has no '='", lineNo)}
		case !envKey(key):
			return 0, &Violation{Rule: RuleBadEnvKey, Detail: fmt.Sprintf("line %d: key %q is not [A-Za-z_][A-Za-z0-9_]*", lineNo, key)}
		case seen[key]:
			return 0, &Violation{Rule: RuleDuplicateKey, Detail: fmt.Sprintf("line %d repeats key %q", lineNo, key)}
		}
		seen[key] = true
		if int64(len(seen)) > maxKeys {
			return 0, &Violation{Rule: RuleOverMaxEntries, Detail: fmt.Sprintf("more than %d variables", maxKeys)}
		}
		if err == io.EOF {
			return int64(len(seen)), nil
		}
	}
}

// envKey reports whether k is an environment variable name.
func envKey(k string) bool {
	if k == "" {
		return false
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		alpha := c == '_' || (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z')
		if !alpha && (i == 0 || c < '0' || c > '9') {
			return false
		}
	}
	return true
}
