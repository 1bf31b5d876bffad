package spec

import "fmt"

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
func (c Command) Digest() (string, error) {
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
