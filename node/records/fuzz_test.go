package records

import (
	"bytes"
	"testing"
)

// FuzzReadLines: whatever a log holds, the cursor only moves forward,
// never past what was read, and every line handed out was complete.
func FuzzReadLines(f *testing.F) {
	f.Add([]byte(refusalLine("a", t0)+`{"at":`), int64(0), false)
	f.Add([]byte("\n\n{}\n"), int64(3), true)
	f.Fuzz(func(t *testing.T, data []byte, start int64, skip bool) {
		if start < 0 {
			start = -start
		}
		c := fileCursor{Offset: start, Skip: skip}
		_, err := readLines(bytes.NewReader(data), &c, newBudget(), func(line []byte) {
			if !bytes.Contains(data, line) || len(line) > maxLine {
				t.Fatalf("line %q not from the data", line)
			}
		})
		if err != nil || c.Offset < start || c.Offset > start+int64(len(data)) {
			t.Fatalf("offset %d from %d over %d bytes: %v", c.Offset, start, len(data), err)
		}
	})
}

// FuzzParseRefusal: a refusals line never panics the parser, and one it
// takes has a reason.
func FuzzParseRefusal(f *testing.F) {
	f.Add([]byte(refusalLine("a", t0)))
	f.Add([]byte(`{"at":"x` + refusalLine("b", t0)))
	f.Fuzz(func(t *testing.T, line []byte) {
		if rf, ok := parseRefusal(line); ok && rf.Reason == "" {
			t.Fatal("a refusal without a reason")
		}
	})
}
