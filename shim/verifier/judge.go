package verifier

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/spec"
)

// The judge protocol: how gensee verify json-schema hands a JSON Schema
// and a product to gensee-verifier (cmd/gensee-verifier, the only program
// that links the JSON Schema library: shim/verifier/schema) and reads its
// verdict. One request, one answer, then the judge exits.
//
// The request, on the judge's stdin, is a header line and two bodies:
//
//	gensee-verifier/1 <schema bytes> <document bytes>\n<schema><document>
//
// The lengths are decimal without a sign or a leading zero, at most
// MaxJudgeSchemaBytes and MaxJudgeDocumentBytes; the input ends right
// after the document. Anything else is refused whole.
//
// The answer, on its stdout, is one JSON object of at most
// MaxJudgeAnswerBytes: {"problems":[...]} (an empty list is a pass) or
// {"schema_error":"..."} when the schema does not compile; the judge exits
// 0 after either. Any other failure (a malformed request, no memory) is
// a message on its stderr and a non-zero exit.
const (
	// JudgeProtocol opens the request's header line.
	JudgeProtocol = "gensee-verifier/1"
	// MaxJudgeSchemaBytes bounds a JSON Schema: gensee verify
	// json-schema reads no larger --schema file.
	MaxJudgeSchemaBytes = 4 << 20
	// MaxJudgeDocumentBytes bounds the judged document: the gate's
	// default max_bytes of a product (gate.DefaultMaxBytes, 64 MiB). A
	// structured_result whose contract allows more is not judged.
	MaxJudgeDocumentBytes = gate.DefaultMaxBytes
	// MaxJudgeAnswerBytes bounds the answer: as many bytes as the
	// largest document, a bound on what gensee holds, not an estimate
	// (each problem names a place in the document and what is wrong
	// there, so a document can have more).
	MaxJudgeAnswerBytes = MaxJudgeDocumentBytes
	// maxJudgeHeader bounds the header line: the protocol, two lengths.
	maxJudgeHeader = len(JudgeProtocol) + 2*(1+20) + 1
)

// JudgeRequest is the request that asks the judge about document doc
// against JSON Schema schema.
func JudgeRequest(schema, doc []byte) ([]byte, error) {
	if err := JudgeSizes(int64(len(schema)), int64(len(doc))); err != nil {
		return nil, err
	}
	h := fmt.Sprintf("%s %d %d\n", JudgeProtocol, len(schema), len(doc))
	req := make([]byte, 0, len(h)+len(schema)+len(doc))
	return append(append(append(req, h...), schema...), doc...), nil
}

// ErrJudgeBounds: a schema or a document is larger than the judge reads.
var ErrJudgeBounds = errors.New("larger than the judge reads")

// JudgeSizes is nil when a schema and a document of these sizes can be
// judged, else an error that wraps ErrJudgeBounds.
func JudgeSizes(schema, doc int64) error {
	switch {
	case schema > MaxJudgeSchemaBytes:
		return fmt.Errorf("the JSON Schema is %d bytes: %w (%d)", schema, ErrJudgeBounds, MaxJudgeSchemaBytes)
	case doc > MaxJudgeDocumentBytes:
		return fmt.Errorf("the document is %d bytes: %w (%d, the gate's default max_bytes)", doc, ErrJudgeBounds, MaxJudgeDocumentBytes)
	}
	return nil
}

// ReadJudgeRequest reads one request from r, exactly as JudgeRequest
// writes it, and returns its schema and document.
func ReadJudgeRequest(r io.Reader) (schema, doc []byte, err error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var line []byte
	for {
		c, err := br.ReadByte()
		if err != nil {
			return nil, nil, fmt.Errorf("read the request's header: %w", noEOF(err))
		}
		if c == '\n' {
			break
		}
		if line = append(line, c); len(line) > maxJudgeHeader {
			return nil, nil, fmt.Errorf("the request's header is longer than %d bytes", maxJudgeHeader)
		}
	}
	f := strings.Split(string(line), " ")
	if len(f) != 3 || f[0] != JudgeProtocol {
		return nil, nil, fmt.Errorf("the request's header %q is not %q", line, JudgeProtocol+" <schema bytes> <document bytes>")
	}
	var n [2]int
	for i, s := range f[1:] {
		v, err := strconv.Atoi(s)
		if err != nil || v < 0 || strconv.Itoa(v) != s {
			return nil, nil, fmt.Errorf("the request's header %q has a length that is not a plain decimal", line)
		}
		n[i] = v
	}
	if err := JudgeSizes(int64(n[0]), int64(n[1])); err != nil {
		return nil, nil, err
	}
	schema, doc = make([]byte, n[0]), make([]byte, n[1])
	if _, err := io.ReadFull(br, schema); err != nil {
		return nil, nil, fmt.Errorf("read the schema: %w", noEOF(err))
	}
	if _, err := io.ReadFull(br, doc); err != nil {
		return nil, nil, fmt.Errorf("read the document: %w", noEOF(err))
	}
	switch _, err := br.ReadByte(); {
	case err == nil:
		return nil, nil, errors.New("the request goes on after its document")
	case err != io.EOF:
		return nil, nil, fmt.Errorf("read the request's end: %w", err)
	}
	return schema, doc, nil
}

// noEOF: input that ends early is a truncated request, not a clean end.
func noEOF(err error) error {
	if err == io.EOF {
		return io.ErrUnexpectedEOF
	}
	return err
}

// judgeAnswer is the answer's JSON: exactly one field set.
type judgeAnswer struct {
	Problems    *[]string `json:"problems,omitempty"`
	SchemaError *string   `json:"schema_error,omitempty"`
}

// JudgeAnswer is the answer that reports problems (none: a pass) or,
// when schemaErr is not nil, that the schema does not compile.
func JudgeAnswer(problems []string, schemaErr error) ([]byte, error) {
	var a judgeAnswer
	if schemaErr != nil {
		msg := schemaErr.Error()
		a.SchemaError = &msg
	} else {
		if problems == nil {
			problems = []string{}
		}
		a.Problems = &problems
	}
	b, err := json.Marshal(a)
	if err != nil {
		return nil, err
	}
	if len(b)+1 > MaxJudgeAnswerBytes {
		return nil, fmt.Errorf("the answer (%d problems) is %d bytes, over the %d gensee reads", len(problems), len(b)+1, MaxJudgeAnswerBytes)
	}
	return append(b, '\n'), nil
}

// SchemaError is a judge's answer that the schema does not compile.
type SchemaError struct{ Msg string }

func (e *SchemaError) Error() string { return e.Msg }

// ParseJudgeAnswer reads an answer as JudgeAnswer writes it: the
// problems, or a *SchemaError; anything else is an error.
func ParseJudgeAnswer(b []byte) ([]string, error) {
	var a judgeAnswer
	if err := spec.DecodeStrict(b, &a, MaxJudgeAnswerBytes); err != nil {
		return nil, fmt.Errorf("the judge's answer: %w", err)
	}
	switch {
	case (a.Problems == nil) == (a.SchemaError == nil):
		return nil, errors.New("the judge's answer has neither or both of problems and schema_error")
	case a.SchemaError != nil && *a.SchemaError == "":
		return nil, errors.New("the judge's answer has an empty schema_error")
	case a.SchemaError != nil:
		return nil, &SchemaError{Msg: *a.SchemaError}
	}
	return *a.Problems, nil
}
