package spec

import (
	"fmt"
	"strings"
)

// ValidationError is one broken rule: the JSON path of the offending value
// ("network.allow[0].ip", "" for the whole document) and what was expected.
type ValidationError struct {
	Path string
	Msg  string
}

func (e ValidationError) Error() string {
	if e.Path == "" {
		return e.Msg
	}
	return e.Path + ": " + e.Msg
}

// ValidationErrors is every rule a document breaks, in document order.
// Validate methods return it (never an empty one) or nil.
type ValidationErrors []ValidationError

// Error lists the errors one per line.
func (es ValidationErrors) Error() string {
	lines := make([]string, len(es))
	for i, e := range es {
		lines[i] = e.Error()
	}
	return strings.Join(lines, "\n")
}

// Is makes errors.Is(err, ErrInvalid) true for validation failures.
func (es ValidationErrors) Is(target error) bool { return target == ErrInvalid }

// problems collects validation errors for one document. A problems made
// by at shares the list and prefixes every path, so a contract checks
// itself the same way standalone and inside a catalog.
type problems struct {
	list   *ValidationErrors
	prefix string
}

func newProblems() problems { return problems{list: new(ValidationErrors)} }

// at returns a collector whose paths are relative to path.
func (p problems) at(path string) problems {
	return problems{list: p.list, prefix: joinPath(p.prefix, path)}
}

func (p problems) add(path, msg string) {
	*p.list = append(*p.list, ValidationError{Path: joinPath(p.prefix, path), Msg: msg})
}

func (p problems) addf(path, format string, args ...any) {
	p.add(path, fmt.Sprintf(format, args...))
}

// err returns nil or the collected errors.
func (p problems) err() error {
	if len(*p.list) == 0 {
		return nil
	}
	return *p.list
}

// joinPath joins two JSON paths: "a" + "b[0]" is "a.b[0]", "a" + "[1]" is "a[1]".
func joinPath(a, b string) string {
	switch {
	case a == "":
		return b
	case b == "":
		return a
	case strings.HasPrefix(b, "["):
		return a + b
	}
	return a + "." + b
}
