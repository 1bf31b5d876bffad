// Package reference is the reference node analyzer (gensee analyzer serve;
// docs/design.md §3.1): it answers the runtime's spec.AnalyzerRequest on a
// unix socket with an inference it signs, or with the reason it names no
// class.
//
// It owns: loading and checking its inputs at start (the verified catalog's
// analyzer entry, the rule set signed by that analyzer's rules_key, its own
// private key and model), matching an observation against the rules,
// weighing the earlier manifests a request names, and signing.
//
// How a class is chosen:
//   - Rules. A rule matches when every field it sets matches: the
//     observation's executable sha256 is in executable_sha256 (every rule
//     has one), the command's args match argv (spec.MatchArgv), the
//     request's image is in image, the command's env holds every entry of
//     env. A rule whose command sets a variable spec.ProtectedEnv protects
//     (PATH aside) that it does not pin in env does not match; when that
//     leaves no rule, the answer names the variable. Each class takes the
//     highest confidence of its matching rules. No matching rule: no class
//     ("novel observation").
//   - History (the rules' history policy; none: no history). An earlier
//     manifest counts for class X only when its bytes hash to the sha256
//     the request names, it is of this very observation digest, it was
//     admitted under X by this analyzer's inference (not safe_default),
//     and spec.Manifest.HistoryVerdict says clean (the one judgement the
//     runtime's history index records too). Each counted run adds
//     per_run_bp to X, at most max_bp in all, never above 10000. History
//     only raises a class a rule gave; it never creates one. One unclean
//     run under X (a failed gate, a finding, a denial, an escape, drift or
//     defeat) withholds X; the runtime keeps naming it (first) for as long
//     as its record is kept. A run whose record is uncertain (gate not
//     run, counters unread, monitor lost) neither counts nor withholds.
//   - The answer names no class exactly when the runtime's admission would
//     refuse the inference for a reason the analyzer can see: the top class
//     has no route in the request's selector, is below the analyzer's
//     min_confidence_bp, or does not lead the next by min_margin_bp (a tie
//     never passes).
//
// Invariants: it signs only its own computation of the request's
// observation digest, after the command it was sent digests to the
// observation's command_digest; it never signs a class outside the
// catalog's scope for it, a model the catalog does not list, or a lifetime
// above max_lifetime. It reads the runtime's records read-only (fd by fd,
// never through a symlink, bounded) and never writes them, nor the
// runtime's catalog high-water mark. It never logs environment values.
//
// What a caller of the socket can and cannot do: anyone who can connect
// (the socket is 0600, the runtime's user) can get an inference for an
// observation they describe, but that inference admits only a container
// whose re-derived observation has that digest; the image and history
// references are claims, and a history reference counts only when it names
// a manifest in the records whose bytes it hashes.
package reference
