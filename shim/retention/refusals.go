package retention

import (
	"bufio"
	"encoding/json"
	"errors"
	"io"
	"os"
	"time"

	"github.com/gensee/gensee/internal/fsafe"
	"github.com/gensee/gensee/shim/record"
	"github.com/gensee/gensee/spec"
)

// RefusalTrim is what a policy does to refusals.jsonl: the oldest Lines
// (Bytes bytes) go, Kept lines stay.
type RefusalTrim struct {
	Lines, Bytes, Kept int64
}

// TrimRefusals cuts refusals.jsonl at its oldest end so that what stays is
// within p: no line older than MaxAge at the head, at most MaxCount lines,
// at most MaxBytes bytes. The newest lines are never dropped for an older
// one.
func TrimRefusals(st record.Store, p Policy, now time.Time) (RefusalTrim, error) {
	var t RefusalTrim
	_, err := st.TrimRefusals(func(r io.Reader) (int64, error) {
		var err error
		t, err = cutRefusals(r, p, now)
		return t.Bytes, err
	})
	return t, err
}

// PlanRefusals is TrimRefusals without the rewrite.
func PlanRefusals(st record.Store, p Policy, now time.Time) (RefusalTrim, error) {
	f, _, err := fsafe.OpenFile(st.RefusalsPath()) // as TrimRefusals: no symlink, no fifo
	if errors.Is(err, os.ErrNotExist) {
		return RefusalTrim{}, nil
	}
	if err != nil {
		return RefusalTrim{}, err
	}
	defer f.Close()
	return cutRefusals(f, p, now)
}

// cutRefusals reads the log once and says where to cut it: after the
// leading lines older than MaxAge (a line whose time does not parse counts
// as old), and after as many more as bring the rest within MaxCount lines
// and MaxBytes bytes.
func cutRefusals(r io.Reader, p Policy, now time.Time) (RefusalTrim, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	var (
		starts []int64 // offset of each line
		size   int64
		aged   = 0 // leading lines older than MaxAge
		head   = true
	)
	for {
		line, err := br.ReadBytes('\n') // whole, however long
		if len(line) > 0 {
			starts = append(starts, size)
			size += int64(len(line))
			if head && p.MaxAge > 0 {
				var l spec.RefusalRecord
				if json.Unmarshal(line, &l) != nil || now.Sub(l.At) > p.MaxAge {
					aged++
				} else {
					head = false
				}
			}
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return RefusalTrim{}, err
		}
	}
	n := len(starts)
	cut := aged
	if p.MaxCount > 0 && int64(n-cut) > p.MaxCount {
		cut = n - int(p.MaxCount)
	}
	for p.MaxBytes > 0 && cut < n && size-starts[cut] > p.MaxBytes {
		cut++
	}
	t := RefusalTrim{Lines: int64(cut), Kept: int64(n - cut)}
	if cut == n {
		t.Bytes = size
	} else {
		t.Bytes = starts[cut]
	}
	return t, nil
}
