// Command conformance-images builds the images critest v1.37 pulls, from
// Debian's busybox-static, and pushes them to a local registry:
//
//	conformance-images -registry 127.0.0.1:PORT -busybox /bin/busybox -euid PATH -sandbox REF
//
// Each image is one uncompressed layer: busybox, a symlink per applet, an
// /etc/passwd and /etc/group, and what the image stands in for needs. A
// reference host/path:tag is pushed to the local repository host/path, so
// one registry serves every upstream: containerd's hosts.toml mirrors
// each upstream to http://REGISTRY/v2/<upstream> with override_path.
//
// It never talks to anything but the registry it is given.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"strings"
)

const (
	e2e     = "registry.k8s.io/e2e-test-images/"
	critest = "gcr.io/k8s-staging-cri-tools/"
)

func main() {
	reg := flag.String("registry", "", "host:port of the local registry (plain HTTP)")
	busybox := flag.String("busybox", "/bin/busybox", "a static busybox")
	euid := flag.String("euid", "", "the static euid helper (hack/conformance-images/euid)")
	sandbox := flag.String("sandbox", "", "reference of the CRI sandbox (pause) image to build as well")
	flag.Parse()
	if *reg == "" || *euid == "" || *sandbox == "" || flag.NArg() != 0 {
		fmt.Fprintln(os.Stderr, "usage: conformance-images -registry HOST:PORT -busybox PATH -euid PATH -sandbox REF")
		os.Exit(2)
	}
	if err := run(*reg, *busybox, *euid, *sandbox); err != nil {
		fmt.Fprintln(os.Stderr, "conformance-images:", err)
		os.Exit(1)
	}
}

func run(reg, busybox, euid, sandbox string) error {
	bb, err := os.ReadFile(busybox)
	if err != nil {
		return fmt.Errorf("read busybox: %w", err)
	}
	out, err := exec.Command(busybox, "--list").Output()
	if err != nil {
		return fmt.Errorf("list busybox applets: %w", err)
	}
	nnp, err := os.ReadFile(euid)
	if err != nil {
		return fmt.Errorf("read euid helper: %w", err)
	}
	base := rootfs{busybox: bb, applets: strings.Fields(string(out))}
	r := &registry{host: reg}
	for _, img := range images(base, nnp, sandbox) {
		for _, ref := range img.refs {
			d, err := r.push(ref, img)
			if err != nil {
				return fmt.Errorf("push %s: %w", ref, err)
			}
			fmt.Printf("%s %s\n", d, ref)
		}
	}
	return nil
}

// image is what one or more references point at.
type image struct {
	refs       []string
	entrypoint []string
	cmd        []string
	user       string
	env        []string
	layer      []byte
}

// images lists what critest v1.37.0 pulls (pkg/validate/consts.go,
// consts_linux.go, multi_container_linux.go, security_context_linux.go,
// pkg/framework/util.go), in the shape its specs need. Not built:
// gcr.io/k8s-staging-cri-tools/test-image-digest@sha256:9700f9a2…, a
// digest no rebuilt image can have.
func images(base rootfs, euid []byte, sandbox string) []image {
	plain := base.layer(nil)
	marked := func(name string) []byte { return base.layer([]file{{name: name, mode: 0o644}}) }
	userImage := func(ref, user string) image {
		return image{refs: []string{critest + ref + ":latest"}, cmd: []string{"sh"}, user: user, layer: plain}
	}
	list := []image{
		{refs: []string{e2e + "busybox:1.29-2"}, cmd: []string{"sh"}, layer: plain},
		// Distinct content: CRI refuses to untag pause:3.9 if the sandbox
		// image shares its digest ("remove all tags from other registries").
		{refs: []string{sandbox}, cmd: []string{"/bin/sleep", "inf"}, layer: marked("etc/gensee-conformance-sandbox")},
		// The same image under two registries.
		{refs: []string{"registry.k8s.io/pause:3.9", "k8s.gcr.io/pause:3.9"}, cmd: []string{"/bin/sleep", "inf"}, layer: marked("pause")},
		// nginx: the HostPID spec reads /var/run/nginx.pid and finds the pid
		// with `pidof nginx`; the ContainerPID spec wants "master process"
		// in /proc/1/cmdline; the networking specs GET / on port 80.
		{refs: []string{e2e + "nginx:1.14-2"}, cmd: []string{"/usr/sbin/nginx", "nginx: master process"},
			layer: base.layer(webServer("/usr/sbin/nginx", "/usr/share/nginx/html", "/var/run/nginx.pid", ""))},
		{refs: []string{critest + "hostnet-nginx-" + runtime.GOARCH + ":latest"}, cmd: []string{"/usr/sbin/nginx", "nginx: master process"},
			env: []string{"PORT=12003"}, layer: base.layer(webServer("/usr/sbin/nginx", "/usr/share/nginx/html", "/var/run/nginx.pid", ""))},
		// httpd: the multi-container spec wants "httpd" in its log.
		{refs: []string{e2e + "httpd:2.4.39-4"}, cmd: []string{"httpd-foreground"},
			layer: base.layer(webServer("/usr/local/bin/httpd-foreground", "/usr/local/apache2/htdocs", "/usr/local/apache2/logs/httpd.pid", "httpd: serving"))},
		// nonewprivs: a setuid-root program printing its effective uid.
		{refs: []string{e2e + "nonewprivs:1.3"}, cmd: []string{"/usr/local/bin/nnp"},
			layer: base.layer([]file{{name: "usr/local/bin/nnp", mode: 0o4755, data: euid}})},
		userImage("test-image-user-uid", "1002"),
		userImage("test-image-user-username", "www-data"),
		userImage("test-image-user-uid-group", "1003:1004"),
		userImage("test-image-user-username-group", "www-data:1004"),
		// default-user (1000) is a member of group-defined-in-image (50000).
		{refs: []string{critest + "test-image-predefined-group:latest"}, cmd: []string{"sh"}, user: "1000",
			layer: rootfs{busybox: base.busybox, applets: base.applets,
				passwd: "default-user:x:1000:1000::/home/default-user:/bin/sh\n",
				group:  "default-user:x:1000:\ngroup-defined-in-image:x:50000:default-user\n"}.layer(nil)},
		// Same tag set, one image (test-image-tags) and one image per tag.
		{refs: []string{critest + "test-image-tags:1", critest + "test-image-tags:2", critest + "test-image-tags:3"},
			cmd: []string{"sh"}, layer: marked("same-image")},
		{refs: []string{critest + "test-image-tag:test"}, cmd: []string{"sh"}, layer: marked("test")},
		{refs: []string{critest + "test-image-tag:all"}, cmd: []string{"sh"}, layer: marked("all")},
	}
	for _, name := range []string{"test-image-1", "test-image-2", "test-image-3", "test-image-latest", "test-image-digest"} {
		list = append(list, image{refs: []string{critest + name + ":latest"}, cmd: []string{"sh"}, layer: marked(name)})
	}
	return list
}

// webServer is a shell script at path that serves dir over HTTP on $PORT
// (default 80) with busybox httpd, writes its own pid to pidFile and, if
// banner is set, prints it. It stays the container's init (its comm is the
// script's name, which is what pidof matches) and exits on SIGTERM.
func webServer(path, dir, pidFile, banner string) []file {
	script := "#!/bin/sh\nmkdir -p " + pidFile[:strings.LastIndex(pidFile, "/")] + " && echo $$ >" + pidFile + "\n"
	if banner != "" {
		script += "echo '" + banner + "'\n"
	}
	script += `httpd -f -p "${PORT:-80}" -h ` + dir + " &\n" +
		"trap 'kill $! 2>/dev/null; exit 0' TERM INT\nwait\n"
	return []file{
		{name: strings.TrimPrefix(path, "/"), mode: 0o755, data: []byte(script)},
		{name: strings.TrimPrefix(dir, "/") + "/index.html", mode: 0o644, data: []byte("<html><body><h1>It works!</h1></body></html>\n")},
	}
}
