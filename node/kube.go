package node

import (
	"fmt"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
)

// KubeClient is the client --events posts with: the kubeconfig at path
// (the kubelet's: the Node authorizer lets a node create and patch
// Events in any namespace), or the pod's service account for InCluster.
func KubeClient(path string) (kubernetes.Interface, error) {
	var (
		rc  *rest.Config
		err error
	)
	if path == InCluster {
		rc, err = rest.InClusterConfig()
	} else {
		rc, err = clientcmd.BuildConfigFromFlags("", path)
	}
	if err != nil {
		return nil, fmt.Errorf("load Kubernetes credentials %s: %w", path, err)
	}
	rc.UserAgent = "gensee-node"
	return kubernetes.NewForConfig(rc)
}
