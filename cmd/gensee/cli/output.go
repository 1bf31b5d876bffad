package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/gensee/gensee/spec"
)

// writeJSON writes v as indented JSON with object keys sorted (canonical
// JSON, then indented), so --json output is stable across releases and
// struct field order.
func writeJSON(w io.Writer, v any) error {
	b, err := spec.CanonicalJSON(v)
	if err != nil {
		return err
	}
	var out bytes.Buffer
	if err := json.Indent(&out, b, "", "  "); err != nil {
		return err
	}
	out.WriteByte('\n')
	_, err = w.Write(out.Bytes())
	return err
}

// table is a tab-aligned block for the human-readable outputs.
func table(w io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
}

// row writes one tab-separated row.
func row(tw *tabwriter.Writer, cols ...string) {
	for i, c := range cols {
		if i > 0 {
			fmt.Fprint(tw, "\t")
		}
		fmt.Fprint(tw, c)
	}
	fmt.Fprint(tw, "\n")
}
