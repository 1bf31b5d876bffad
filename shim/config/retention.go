package config

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Retention defaults (docs/design.md §9): what a busy CI host keeps by default.
// Records are evidence, so the defaults are generous; an operator lowers
// them, or sets a key to 0 to lift that limit.
const (
	DefaultRetentionMaxAge   = 30 * 24 * time.Hour
	DefaultRetentionMaxCount = 5000
	DefaultRetentionMaxBytes = 8 << 30
)

// Retention bounds the records under the state directory. Each limit
// applies on its own to the operation records (operations/<id>/, oldest
// finished first) and to the lines of refusals.jsonl (oldest first); 0
// lifts a limit. An operation whose task still runs, which was not
// deleted yet, or whose attention is set is never removed, whatever the
// limits say.
type Retention struct {
	// MaxAge: an operation that finished longer ago, or a refusal line
	// older than this, is removed. "0s" keeps them whatever their age.
	MaxAge Age `toml:"max_age"`
	// MaxCount: at most this many operations, and this many refusal lines.
	MaxCount int64 `toml:"max_count"`
	// MaxBytes: at most this many bytes of operation records in total
	// (staged products included), and of refusals.jsonl.
	MaxBytes ByteSize `toml:"max_bytes"`
}

// DefaultRetention is the retention of the built-in configuration.
func DefaultRetention() Retention {
	return Retention{
		MaxAge:   Age{DefaultRetentionMaxAge},
		MaxCount: DefaultRetentionMaxCount,
		MaxBytes: DefaultRetentionMaxBytes,
	}
}

func (r Retention) validate() error {
	if r.MaxCount < 0 {
		return fmt.Errorf("retention.max_count %d must not be negative (0 lifts the limit)", r.MaxCount)
	}
	if r.MaxBytes < 0 {
		return fmt.Errorf("retention.max_bytes %d must not be negative (0 lifts the limit)", r.MaxBytes)
	}
	return nil
}

// Age is a non-negative duration written as a Go duration string; zero
// means no limit.
type Age struct{ time.Duration }

// UnmarshalText parses a Go duration string such as "720h"; "0s" is allowed.
func (a *Age) UnmarshalText(b []byte) error {
	v, err := time.ParseDuration(string(b))
	if err != nil {
		return err
	}
	if v < 0 {
		return fmt.Errorf("duration %q must not be negative", b)
	}
	a.Duration = v
	return nil
}

// MarshalText writes the age as a Go duration string.
func (a Age) MarshalText() ([]byte, error) { return []byte(a.Duration.String()), nil }

// ByteSize is a byte count written as an integer or a string with a binary
// unit: 0, 1048576, "512MiB", "8GiB". Zero means no limit.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40}, {"B", 1}}

// UnmarshalText parses "8GiB", "512MiB", "4096B" or a bare integer in a
// string; a TOML integer decodes as the byte count itself.
func (s *ByteSize) UnmarshalText(b []byte) error {
	v, err := ParseByteSize(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// ParseByteSize parses a byte count with an optional binary unit.
func ParseByteSize(in string) (ByteSize, error) {
	t := strings.TrimSpace(in)
	mult := int64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, mult = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("byte size %q: want a non-negative integer with an optional unit B, KiB, MiB, GiB or TiB", in)
	}
	if n > (1<<63-1)/mult {
		return 0, fmt.Errorf("byte size %q is too large", in)
	}
	return ByteSize(n * mult), nil
}

// String writes the size with the largest unit that divides it.
func (s ByteSize) String() string {
	for i := 3; i >= 0; i-- {
		u := byteUnits[i]
		if s != 0 && int64(s)%u.mult == 0 {
			return strconv.FormatInt(int64(s)/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}

// MarshalText writes the size as String does.
func (s ByteSize) MarshalText() ([]byte, error) { return []byte(s.String()), nil }
