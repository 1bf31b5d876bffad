// Package admission decides, at task Create, which single approved contract
// governs a container (docs/design.md §3), or refuses it. It owns that decision and
// its reason codes; it is a pure function of its Input: no file system, no
// clock (Now is an input), no network, no logging. Loading and verifying
// the catalog is shim/trust's job, re-deriving the observation is
// shim/observe's; the caller records the Decision.
//
// Order of checks (the first failure is the reason):
//
//  1. a catalog is present and unexpired (no_catalog, catalog_expired);
//  2. exactly one selector matches the trusted facts: every field the
//     selector sets equals the fact, unset fields are not compared, so a
//     selector with k8s_namespace matches only CRI pods of that namespace
//     (no_selector, ambiguous_selector). Overlapping selectors are not
//     ranked: several matches refuse, so an operator makes them disjoint;
//  3. the selector's volatile_env, if any, is left out of the observation's
//     command digest (stabilize: Input.Command must be what the digest
//     covers; PATH, LD_* and spec.ProtectedEnv never are), and the
//     observation so stabilized is well formed (observation_invalid);
//  4. a preflight observation annotation, if present, equals it
//     (preflight_mismatch);
//  5. when no inference is attached and the selector names an analyzer,
//     Input.Ask asks it (the only I/O, the door's, bounded by the
//     selector's timeout); an answer that brings no inference is
//     analyzer_unavailable or analyzer_no_class, recorded in
//     Decision.Analyzer;
//  6. the inference (the annotation's, or the analyzer's, which must be
//     signed by the analyzer the selector names): present (no_inference); a strict DSSE
//     envelope of the inference payloadType (inference_malformed); signed by
//     the key the catalog lists for the analyzer the payload names, so an
//     analyzer is never impersonated and a caller's key is never used
//     (unknown_analyzer, bad_signature; the payload is parsed for the
//     decision only after a catalog key verified it); made for this
//     observation (observation_mismatch); model listed for the analyzer
//     (unknown_model); now < expires_at and issued_at <= now + ClockSkew
//     (expired); expires_at - issued_at <= the analyzer's max_lifetime
//     (lifetime_exceeded); every candidate in the analyzer's class scope
//     (class_out_of_scope); the top class routed by the selector
//     (novel_class); top confidence >= min_confidence_bp (low_confidence);
//     top strictly ahead of the second by at least min_margin_bp, a lone
//     candidate's margin being its confidence (tie_or_low_margin);
//  7. the route's contract exists in the catalog (unrouted).
//
// safe_default policy. When the inference is absent or does not decide
// (no_inference, inference_malformed, unknown_model, expired,
// lifetime_exceeded, class_out_of_scope, novel_class, low_confidence,
// tie_or_low_margin, unrouted) and the selector names a safe_default, the
// container is admitted under it with SafeDefault set and FallbackFrom the
// reason. Integrity failures never fall back: bad_signature and
// unknown_analyzer (an inference no catalog analyzer signed),
// observation_mismatch (an inference made for other code) and
// preflight_mismatch (the caller asserted an observation that is not what
// runs) refuse outright, like no_catalog, catalog_expired,
// observation_invalid and selector failures. Omitting the inference would
// have earned the safe default anyway; refusing makes tampering loud
// instead of quietly downgrading it. An inference the runtime asked the
// node analyzer for is different: nothing the caller attached failed, so
// every failure of the analyzer's answer (analyzer_unavailable,
// analyzer_no_class, and the integrity reasons too) is "no inference" and
// falls back like no_inference; it never refuses harder than the
// analyzer's absence, and never admits more.
//
// This package must never take a contract, key or selector from the
// caller, never admit without exactly one matched selector, and never
// return Admitted without a contract from the catalog.
package admission
