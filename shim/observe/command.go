package observe

import (
	"fmt"

	"github.com/gensee/gensee/spec"
)

// commandDoc is the object the command digest covers: process.args,
// process.env and process.cwd from config.json, verbatim — order and
// duplicates kept, nothing resolved or defaulted, absent lists as []:
//
//	{"args":["/bin/sh","-c","make"],"cwd":"/workspace","env":["PATH=/usr/bin","HOME=/root"]}
//
// command_digest = spec.Digest(commandDoc), i.e. "sha256:<hex>" over its
// canonical JSON. `gensee observe` and `gensee boundary run` compute the
// same value with CommandDigest.
type commandDoc struct {
	Args []string `json:"args"`
	Env  []string `json:"env"`
	Cwd  string   `json:"cwd"`
}

// CommandDigest returns the command digest of args, env and cwd (see
// commandDoc for the exact canonical object).
func CommandDigest(args, env []string, cwd string) (string, error) {
	doc := commandDoc{Args: args, Env: env, Cwd: cwd}
	if doc.Args == nil {
		doc.Args = []string{}
	}
	if doc.Env == nil {
		doc.Env = []string{}
	}
	d, err := spec.Digest(doc)
	if err != nil {
		return "", fmt.Errorf("digest command: %w", err)
	}
	return d, nil
}
