package spec

// Validate checks an inference payload's shape: schema, analyzer and model
// ids, observation digest, 1-16 ranked candidates with unique classes and
// confidences in 0..10000, and issued_at < expires_at. Whether the catalog
// accepts it (scope, thresholds, expiry against now) is the admission's job.
func (in *Inference) Validate() error {
	p := newProblems()
	checkSchema(p, in.Schema, SchemaInference)
	checkID(p, "analyzer", "analyzer id", in.Analyzer)
	checkModel(p, "model", in.Model)
	checkDigest(p, "observation_digest", in.ObservationDigest)
	switch n := len(in.Candidates); {
	case n == 0:
		p.add("candidates", "at least one candidate is required")
	case n > maxCandidate:
		p.addf("candidates", "has %d candidates, at most %d allowed", n, maxCandidate)
	}
	seen := map[string]int{}
	for i, c := range in.Candidates {
		cp := p.at(joinIndex("candidates", i))
		checkID(cp, "class", "class", c.Class)
		if j, dup := seen[c.Class]; dup && c.Class != "" {
			cp.addf("class", "%q duplicates candidates[%d].class", c.Class, j)
		}
		seen[c.Class] = i
		checkBP(cp, "confidence_bp", c.ConfidenceBP)
		if i > 0 && c.ConfidenceBP > in.Candidates[i-1].ConfidenceBP {
			cp.add("confidence_bp", "candidates must be ranked by confidence_bp, highest first")
		}
	}
	checkWindow(p, in.IssuedAt, in.ExpiresAt)
	return p.err()
}

// Validate checks an observation's shape: schema, executable hash and
// command digest. uid and gid are any 32-bit ids.
func (o *Observation) Validate() error {
	p := newProblems()
	checkSchema(p, o.Schema, SchemaObservation)
	checkHex64(p, "executable_sha256", "executable_sha256", o.ExecutableSHA256)
	checkDigest(p, "command_digest", o.CommandDigest)
	checkVolatileNames(p, o.VolatileEnv)
	return p.err()
}
