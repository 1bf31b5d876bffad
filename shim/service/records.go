package service

import (
	"github.com/gensee/gensee/shim/admission"
	"github.com/gensee/gensee/spec"
)

// recordFacts is the trusted facts admission matched selectors against,
// as admission.json records them.
func recordFacts(f admission.Facts) spec.AdmissionFacts {
	return spec.AdmissionFacts{ContainerdNamespace: f.ContainerdNamespace, Runtime: f.Runtime, K8sNamespace: f.K8sNamespace}
}
