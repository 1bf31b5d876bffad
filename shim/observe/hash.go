package observe

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
)

// MaxExecutableBytes bounds how much of an executable is hashed. Larger
// files are refused rather than hashed partially.
const MaxExecutableBytes = 512 << 20

// hashExecutable returns the hex sha256 of exe's contents. The size from
// fstat is checked first; the read is bounded too, since the file may grow.
func hashExecutable(exe executable) (string, error) {
	if err := checkSize(exe); err != nil {
		return "", err
	}
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(exe.f, MaxExecutableBytes+1))
	if err != nil {
		return "", fmt.Errorf("read executable %s: %w", exe.path, err)
	}
	if n > MaxExecutableBytes {
		return "", fmt.Errorf("executable %s grew past %d bytes while hashed: %w", exe.path, MaxExecutableBytes, ErrExecutableTooLarge)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// checkSize refuses an executable whose fstat size is past
// MaxExecutableBytes.
func checkSize(exe executable) error {
	if exe.size > MaxExecutableBytes {
		return fmt.Errorf("executable %s is %d bytes, limit %d: %w", exe.path, exe.size, MaxExecutableBytes, ErrExecutableTooLarge)
	}
	return nil
}
