package cli

import (
	"flag"
	"fmt"
)

// formatValue is --format json|table, added to every leaf with a --json
// flag: --format json is --json, --format table the readable default.
type formatValue struct{ fs *flag.FlagSet }

func (v formatValue) String() string { return "" }

func (v formatValue) Set(s string) error {
	switch s {
	case "json":
		return v.fs.Set("json", "true")
	case "table":
		return v.fs.Set("json", "false")
	}
	return fmt.Errorf("want json or table")
}

func addFormatFlag(fs *flag.FlagSet) {
	if fs.Lookup("json") == nil || fs.Lookup("format") != nil {
		return
	}
	fs.Var(formatValue{fs}, "format", "output format `json|table` (json is --json; table, the default, is for people)")
}
