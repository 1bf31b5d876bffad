package analyzer

import (
	"bytes"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/gensee/gensee/spec"
)

// maxDetail bounds a consult's detail (an analyzer's no-class reason, an
// error): it reaches admission.json, the refusals log and a caller's
// error.
const maxDetail = 240

// decodeAnswer reads an answer's body: a strict gensee.analyzer-answer/v1
// with exactly one of an inference envelope (a JSON object, returned as
// it is for admission to verify) or a no-class reason.
func decodeAnswer(body []byte) (env []byte, outcome, detail string) {
	var a spec.AnalyzerAnswer
	if err := spec.DecodeStrict(body, &a, spec.MaxAnalyzerAnswer); err != nil {
		return nil, spec.ConsultMalformed, "decode the answer: " + err.Error()
	}
	if a.Schema != spec.SchemaAnalyzerAnswer {
		return nil, spec.ConsultMalformed, "the answer's schema is " + strings.TrimSpace(Printable(a.Schema, 80)) + ", not " + spec.SchemaAnalyzerAnswer
	}
	inf := bytes.TrimSpace(a.Inference)
	switch {
	case len(inf) > 0 && a.NoClass != "":
		return nil, spec.ConsultMalformed, "the answer carries both an inference and no_class"
	case len(inf) > 0 && inf[0] != '{':
		return nil, spec.ConsultMalformed, "the answer's inference is not a JSON object (a DSSE envelope)"
	case len(inf) > 0:
		return bytes.Clone(inf), spec.ConsultAnswered, ""
	case strings.TrimSpace(a.NoClass) != "":
		return nil, spec.ConsultNoClass, a.NoClass
	}
	return nil, spec.ConsultMalformed, "the answer carries neither an inference nor no_class"
}

// Printable is s cut to at most n bytes (on a rune boundary, "..." marking
// the cut) with every control, format or invalid character as '?': an
// analyzer's words go into records and terminals.
func Printable(s string, n int) string {
	return strings.Map(func(r rune) rune {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			return '?'
		}
		return r
	}, spec.Truncate(s, n))
}
