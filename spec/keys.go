package spec

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"
)

// Key files hold lowercase hex, one line: a public key is the 32 key bytes
// (64 hex chars), a private key is the 32-byte RFC 8032 seed (64 hex chars),
// never the 64-byte expanded form. One trailing "\n" is allowed, nothing else.

// ParsePublicKeyHex parses an ed25519 public key written as 64 lowercase
// hex characters, optionally followed by one newline.
func ParsePublicKeyHex(s string) (ed25519.PublicKey, error) {
	b, err := parseHex32(s)
	if err != nil {
		return nil, fmt.Errorf("parse public key: %w", err)
	}
	return ed25519.PublicKey(b), nil
}

// ParsePrivateKeyHex parses an ed25519 private key written as its 32-byte
// seed in 64 lowercase hex characters, optionally followed by one newline.
func ParsePrivateKeyHex(s string) (ed25519.PrivateKey, error) {
	b, err := parseHex32(s)
	if err != nil {
		return nil, fmt.Errorf("parse private key: %w", err)
	}
	return ed25519.NewKeyFromSeed(b), nil
}

// FormatPublicKeyHex returns the key file text for pub: 64 hex chars and a newline.
func FormatPublicKeyHex(pub ed25519.PublicKey) string {
	return hex.EncodeToString(pub) + "\n"
}

// FormatPrivateKeyHex returns the key file text for priv: its seed as 64
// hex chars and a newline.
func FormatPrivateKeyHex(priv ed25519.PrivateKey) string {
	return hex.EncodeToString(priv.Seed()) + "\n"
}

// KeyID is the DSSE keyid of pub: the lowercase hex sha256 of its 32 bytes.
func KeyID(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(pub)
	return hex.EncodeToString(sum[:])
}

func parseHex32(s string) ([]byte, error) {
	s = strings.TrimSuffix(s, "\n")
	if !IsHex64(s) {
		return nil, fmt.Errorf("%w: want exactly 64 lowercase hex characters (one optional trailing newline), got %d characters", ErrKey, len(s))
	}
	b, err := hex.DecodeString(s)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrKey, err)
	}
	return b, nil
}

// IsHex64 reports whether s is 64 lowercase hex digits (a sha256, an
// ed25519 key).
func IsHex64(s string) bool { return len(s) == 64 && isLowerHex(s) }

func isLowerHex(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
