package spec

import (
	"crypto/ed25519"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
)

func TestKeyHex(t *testing.T) {
	k := testKey(7)
	p, err := ParsePublicKeyHex(FormatPublicKeyHex(pub(k)))
	if err != nil || !p.Equal(pub(k)) {
		t.Fatalf("public round trip: %v", err)
	}
	s, err := ParsePrivateKeyHex(FormatPrivateKeyHex(k))
	if err != nil || !s.Equal(k) {
		t.Fatalf("private round trip: %v", err)
	}
	good := hex.EncodeToString(pub(k))
	for name, in := range map[string]string{
		"empty":          "",
		"short":          good[:62],
		"long":           good + "00",
		"uppercase":      strings.ToUpper(good),
		"two newlines":   good + "\n\n",
		"crlf":           good + "\r\n",
		"leading space":  " " + good,
		"non hex":        "zz" + good[2:],
		"expanded 128":   hex.EncodeToString(k),
		"trailing space": good + " ",
	} {
		if _, err := ParsePublicKeyHex(in); !errors.Is(err, ErrKey) {
			t.Errorf("public %s: err = %v, want ErrKey", name, err)
		}
		if _, err := ParsePrivateKeyHex(in); !errors.Is(err, ErrKey) {
			t.Errorf("private %s: err = %v, want ErrKey", name, err)
		}
	}
}

func TestKeyID(t *testing.T) {
	p := pub(testKey(3))
	sum := sha256.Sum256(p)
	if KeyID(p) != hex.EncodeToString(sum[:]) || len(KeyID(p)) != 64 {
		t.Fatal(KeyID(p))
	}
	var _ ed25519.PublicKey = p
}
