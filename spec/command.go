package spec

import (
	"fmt"
	"unicode/utf8"
)

// Command is what an observation's command_digest covers: the process
// args, env and cwd from the bundle's config.json, in that order of
// meaning. The shim at Create and `gensee observe` must digest the same
// value, so both build it here.
type Command struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
}

// Digest returns "sha256:<hex>" over the canonical JSON of c. Nil and empty
// lists digest alike (both as []), so a missing env never changes the digest.
// A value that is not valid UTF-8 is an error wrapping ErrMalformed: JSON
// would turn each invalid byte into U+FFFD, so two commands that differ
// only there would share a digest (and an inference made for one).
func (c Command) Digest() (string, error) {
	if err := c.checkUTF8(); err != nil {
		return "", err
	}
	if c.Args == nil {
		c.Args = []string{}
	}
	if c.Env == nil {
		c.Env = []string{}
	}
	d, err := Digest(c)
	if err != nil {
		return "", fmt.Errorf("command digest: %w", err)
	}
	return d, nil
}

// checkUTF8 refuses a value of c that is not valid UTF-8.
func (c Command) checkUTF8() error {
	for i, a := range c.Args {
		if !utf8.ValidString(a) {
			return fmt.Errorf("command digest: args[%d] is not valid UTF-8: %w", i, ErrMalformed)
		}
	}
	for i, e := range c.Env {
		if !utf8.ValidString(e) {
			return fmt.Errorf("command digest: env[%d] is not valid UTF-8: %w", i, ErrMalformed)
		}
	}
	if !utf8.ValidString(c.Cwd) {
		return fmt.Errorf("command digest: cwd is not valid UTF-8: %w", ErrMalformed)
	}
	return nil
}
