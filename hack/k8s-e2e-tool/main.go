// Command k8s-e2e-tool makes what hack/k8s-e2e.sh's private cluster needs and
// nothing else can give it here without kubeadm or a registry:
//
//	k8s-e2e-tool pki DIR NODE NODE-IP SERVICE-IP
//	    a throwaway CA and, signed by it, the apiserver's serving certificate and
//	    the client certificates of the admin, the controller-manager, the
//	    scheduler, kube-proxy, the kubelet (system:node:NODE) and the apiserver's kubelet
//	    client; the service-account signing key pair. ECDSA P-256, one day.
//	k8s-e2e-tool image OUT.tar NAME BUSYBOX PROBE [CMD...]
//	    an OCI image archive (integration/testimage: busybox, its applets and the
//	    probe) named NAME with CMD as its default command, for ctr images import.
package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"github.com/gensee/gensee/integration/testimage"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 6 && os.Args[1] == "pki":
		err = pki(os.Args[2], os.Args[3], net.ParseIP(os.Args[4]), net.ParseIP(os.Args[5]))
	case len(os.Args) >= 6 && os.Args[1] == "image":
		o := testimage.Options{Name: os.Args[3], Busybox: os.Args[4], Probe: os.Args[5]}
		if len(os.Args) > 6 {
			o.Cmd = os.Args[6:]
		}
		err = testimage.Write(os.Args[2], o)
	default:
		fmt.Fprintln(os.Stderr, "usage: k8s-e2e-tool pki DIR NODE NODE-IP SERVICE-IP | image OUT.tar NAME BUSYBOX PROBE [CMD...]")
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "k8s-e2e-tool:", err)
		os.Exit(1)
	}
}

type cert struct {
	name   string // file stem: NAME.crt, NAME.key
	cn     string
	orgs   []string
	server bool
	dns    []string
	ips    []net.IP
}

func pki(dir, node string, nodeIP, serviceIP net.IP) error {
	if nodeIP == nil || serviceIP == nil {
		return fmt.Errorf("pki: NODE-IP and SERVICE-IP must be IP addresses")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	now := time.Now().Add(-time.Minute)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	caTmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "gensee-k8s-e2e-ca"},
		NotBefore: now, NotAfter: now.Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return err
	}
	ca, _ := x509.ParseCertificate(caDER)
	if err := write(dir, "ca", caDER, caKey); err != nil {
		return err
	}
	certs := []cert{
		{name: "apiserver", cn: "kube-apiserver", server: true,
			dns: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
			ips: []net.IP{net.IPv4(127, 0, 0, 1), nodeIP, serviceIP}},
		{name: "admin", cn: "kubernetes-admin", orgs: []string{"system:masters"}},
		{name: "controller-manager", cn: "system:kube-controller-manager"},
		{name: "scheduler", cn: "system:kube-scheduler"},
		// Bound to ClusterRole system:node-proxier by the bootstrap RBAC policy.
		{name: "kube-proxy", cn: "system:kube-proxy"},
		{name: "kubelet", cn: "system:node:" + node, orgs: []string{"system:nodes"}},
		{name: "apiserver-kubelet-client", cn: "kube-apiserver-kubelet-client", orgs: []string{"system:masters"}},
	}
	for i, c := range certs {
		key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		if err != nil {
			return err
		}
		t := &x509.Certificate{
			SerialNumber: big.NewInt(int64(i + 2)), Subject: pkix.Name{CommonName: c.cn, Organization: c.orgs},
			NotBefore: now, NotAfter: now.Add(24 * time.Hour), DNSNames: c.dns, IPAddresses: c.ips,
			KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
			ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		}
		if c.server {
			t.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		}
		der, err := x509.CreateCertificate(rand.Reader, t, ca, &key.PublicKey, caKey)
		if err != nil {
			return err
		}
		if err := write(dir, c.name, der, key); err != nil {
			return err
		}
	}
	// The service-account token signing pair.
	sa, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	if err := writeKey(filepath.Join(dir, "sa.key"), sa); err != nil {
		return err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "sa.pub"), pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o644)
}

func write(dir, name string, der []byte, key *ecdsa.PrivateKey) error {
	if err := os.WriteFile(filepath.Join(dir, name+".crt"), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		return err
	}
	return writeKey(filepath.Join(dir, name+".key"), key)
}

func writeKey(path string, key *ecdsa.PrivateKey) error {
	b, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: b}), 0o600)
}
