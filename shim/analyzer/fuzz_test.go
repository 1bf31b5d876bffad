package analyzer

import (
	"testing"
	"unicode"
	"unicode/utf8"

	"github.com/gensee/gensee/spec"
)

// FuzzDecodeAnswer: any body an analyzer sends comes to one outcome, an
// envelope only when answered, and a printable, bounded detail.
func FuzzDecodeAnswer(f *testing.F) {
	f.Add([]byte(`{"schema":"gensee.analyzer-answer/v1","inference":` + envelope + `}`))
	f.Add([]byte(`{"schema":"gensee.analyzer-answer/v1","no_class":"novel"}`))
	f.Add([]byte(`{"schema":"gensee.analyzer-answer/v1","no_class":"\u001b[2J"}`))
	f.Add([]byte(`{"schema":"gensee.analyzer-answer/v1","inference":null}`))
	f.Add([]byte(`{"schema":"gensee.analyzer-answer/v1","inference":"x","no_class":""}`))
	f.Add([]byte("\xff"))
	f.Fuzz(func(t *testing.T, body []byte) {
		env, outcome, detail := decodeAnswer(body)
		switch outcome {
		case spec.ConsultAnswered:
			if len(env) == 0 || env[0] != '{' {
				t.Fatalf("answered with envelope %q", env)
			}
		case spec.ConsultNoClass, spec.ConsultMalformed:
			if env != nil {
				t.Fatalf("%s with an envelope", outcome)
			}
		default:
			t.Fatalf("outcome %q", outcome)
		}
		d := Printable(detail, maxDetail)
		if len(d) > maxDetail+3 || !utf8.ValidString(d) {
			t.Fatalf("detail %q", d)
		}
		for _, r := range d {
			if !unicode.IsPrint(r) && r != ' ' {
				t.Fatalf("detail %q holds %U", d, r)
			}
		}
	})
}
