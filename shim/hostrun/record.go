package hostrun

// Namespace is the record namespace host runs are indexed under: a host
// run is findable as --namespace host --container <operation id>, or by
// --operation.
const Namespace = "host"
