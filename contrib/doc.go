// Package contrib holds no code: it is the operator kit (containerd drop-in,
// operator config, systemd drop-in and
// verify timer, Kubernetes RuntimeClass and installer,
// example catalogs and contracts). Its tests parse every YAML, TOML and JSON
// file here and check names, keys and paths against the runtime's constants,
// so the kit cannot drift from the code it configures.
package contrib
