package cli

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gensee/gensee/spec"
)

// maxKeyFileBytes caps a key file: 64 hex characters and a newline fit.
const maxKeyFileBytes = 256

// readPrivateKey reads an ed25519 private key file in the format keygen
// writes (the 32-byte seed as 64 lowercase hex). A key readable by group or
// other is used but warned about.
func (e *Env) readPrivateKey(path string) (ed25519.PrivateKey, error) {
	data, err := e.readInput(path, maxKeyFileBytes)
	if err != nil {
		return nil, readErr("private key", path, err)
	}
	key, err := spec.ParsePrivateKeyHex(string(data))
	if err != nil {
		return nil, fail(ExitUsage, "read private key "+path, err, "pass the *-private-key.hex file that gensee catalog keygen (or inference keygen) wrote")
	}
	if st, err := os.Stat(path); err == nil && st.Mode().Perm()&0o077 != 0 {
		e.warnf("private key %s has mode %04o, readable beyond its owner; run: chmod 0600 %s", path, st.Mode().Perm(), path)
	}
	return key, nil
}

// trustedKey parses --trusted-key: 64 lowercase hex characters, or a file
// holding them (as keygen writes catalog-root-public-key.hex).
func (e *Env) trustedKey(v string) (ed25519.PublicKey, error) {
	if key, err := spec.ParsePublicKeyHex(v); err == nil {
		return key, nil
	}
	data, err := e.readInput(v, maxKeyFileBytes)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) && len(v) == 64 {
			return nil, fail(ExitUsage, "parse --trusted-key", fmt.Errorf("%q is neither 64 lowercase hex characters nor a file", v), "pass the catalog root public key as hex or as its .hex file")
		}
		return nil, readErr("trusted key", v, err)
	}
	key, err := spec.ParsePublicKeyHex(string(data))
	if err != nil {
		return nil, fail(ExitUsage, "read trusted key "+v, err, "pass the catalog-root-public-key.hex file that gensee catalog keygen wrote")
	}
	return key, nil
}

// keyPair names the two files a keygen writes.
type keyPair struct {
	private, public string
}

func pairIn(dir, prefix string) keyPair {
	return keyPair{
		private: filepath.Join(dir, prefix+"-private-key.hex"),
		public:  filepath.Join(dir, prefix+"-public-key.hex"),
	}
}

// writeKeyPair generates an ed25519 key and writes the pair: the private
// seed with mode 0600, the public key with 0644. It refuses to replace
// either file and removes the private file if the public one fails.
func writeKeyPair(kp keyPair) (ed25519.PublicKey, error) {
	for _, p := range []string{kp.private, kp.public} {
		if _, err := os.Lstat(p); err == nil {
			return nil, fail(ExitUsage, "write key "+p, errors.New("file exists"), "refusing to overwrite a key; choose another --out directory or move the old key away")
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, fail(ExitUsage, "generate ed25519 key", err, "")
	}
	if err := writeNew(kp.private, []byte(spec.FormatPrivateKeyHex(priv)), 0o600); err != nil {
		return nil, writeErr("private key", kp.private, err)
	}
	if err := writeNew(kp.public, []byte(spec.FormatPublicKeyHex(pub)), 0o644); err != nil {
		os.Remove(kp.private)
		return nil, writeErr("public key", kp.public, err)
	}
	return pub, nil
}
