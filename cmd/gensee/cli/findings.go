package cli

import (
	"errors"
	"fmt"
	"io"

	"github.com/gensee/gensee/spec"
)

// findings turns a spec parse error into one "<json path>: <message>" line
// per broken rule. ok is false when err carries no path (then report it
// whole). "(document)" stands for the root path.
func findings(err error) (lines []string, ok bool) {
	var ves spec.ValidationErrors
	if errors.As(err, &ves) {
		for _, v := range ves {
			lines = append(lines, pathLine(v.Path, v.Msg))
		}
		return lines, len(lines) > 0
	}
	var de *spec.DecodeError
	if errors.As(err, &de) {
		return []string{pathLine(de.Path, de.Msg)}, true
	}
	return nil, false
}

func pathLine(path, msg string) string {
	if path == "" {
		path = "(document)"
	}
	return path + ": " + msg
}

// invalid prints a document's findings to w and returns the refusal (exit 1).
// what names the document ("contract x.json").
func invalid(w io.Writer, what string, err error, fix string) error {
	lines, ok := findings(err)
	if !ok {
		return fail(ExitRefused, what+" is invalid", err, fix)
	}
	for _, l := range lines {
		fmt.Fprintln(w, l)
	}
	n := "1 problem"
	if len(lines) > 1 {
		n = fmt.Sprintf("%d problems", len(lines))
	}
	return fail(ExitRefused, what+" is invalid", fmt.Errorf("%s, listed by JSON path", n), fix)
}
