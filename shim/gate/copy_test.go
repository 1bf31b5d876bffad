package gate

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"io"
	"math/rand/v2"
	"testing"
)

// The pipelined copy writes exactly the bytes it hashes, in order, at and
// around chunk boundaries, and reads at most limit+1 bytes.
func TestCopyPipelinedBytes(t *testing.T) {
	rng := rand.NewChaCha8([32]byte{9})
	for _, size := range []int{pipelineAbove, pipelineAbove + 1, pipelineAbove + chunkSize - 1, pipelineAbove + 3*chunkSize + 4095, pipelineDepth*chunkSize*2 + 17} {
		src := make([]byte, size)
		rng.Read(src)
		var dst bytes.Buffer
		n, sum, err := copyHashed(context.Background(), &dst, bytes.NewReader(src), int64(size), int64(size), nil)
		want := sha256.Sum256(src)
		if err != nil || n != int64(size) || !bytes.Equal(dst.Bytes(), src) || !bytes.Equal(sum, want[:]) {
			t.Fatalf("size %d: n %d err %v, copy equal %t, hash equal %t", size, n, err, bytes.Equal(dst.Bytes(), src), bytes.Equal(sum, want[:]))
		}
		dst.Reset()
		limit := int64(size) * 2 / 3
		n, _, err = copyHashed(context.Background(), &dst, bytes.NewReader(src), int64(size), limit, nil)
		if err != nil || n != limit+1 || !bytes.Equal(dst.Bytes(), src[:limit+1]) {
			t.Fatalf("size %d limit %d: n %d err %v, copy equal %t", size, limit, n, err, bytes.Equal(dst.Bytes(), src[:limit+1]))
		}
	}
}

type failWriter struct{ after int }

func (w *failWriter) Write(p []byte) (int, error) {
	if w.after <= 0 {
		return 0, errors.New("disk full")
	}
	w.after--
	return len(p), nil
}

type failReader struct {
	r     io.Reader
	after int64
}

func (f *failReader) Read(p []byte) (int, error) {
	if f.after <= 0 {
		return 0, errors.New("input/output error")
	}
	p = p[:min(int64(len(p)), f.after)]
	n, err := f.r.Read(p)
	f.after -= int64(n)
	return n, err
}

// A failed write, a failed read and a cancelled context each end the copy
// with their error, and no stage is left blocked.
func TestCopyPipelinedFailures(t *testing.T) {
	const size = 8 * chunkSize
	src := make([]byte, size)
	_, _, err := copyHashed(context.Background(), &failWriter{after: 2}, bytes.NewReader(src), size, size, nil)
	if err == nil || err.Error() != "disk full" {
		t.Fatalf("failed write: %v", err)
	}
	_, _, err = copyHashed(context.Background(), io.Discard, &failReader{r: bytes.NewReader(src), after: 3*chunkSize + 7}, size, size, nil)
	var se *sourceError
	if !errors.As(err, &se) {
		t.Fatalf("failed read: %v, want a sourceError", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, _, err = copyHashed(ctx, io.Discard, bytes.NewReader(src), size, size, nil)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled: %v", err)
	}
}
