package config

import (
	"reflect"
	"strings"
	"testing"
)

// TestUnknownKeyListsKeys checks that the refusal of an unknown key names
// every key the operator config has, so the fix-it sentence is complete.
func TestUnknownKeyListsKeys(t *testing.T) {
	_, err := Parse("/etc/gensee/config.toml", []byte("containerd_rot = \"/var/lib/rancher/k3s/agent/containerd\"\n"))
	if err == nil {
		t.Fatal("an unknown key was accepted")
	}
	ct := reflect.TypeFor[Config]()
	for i := range ct.NumField() {
		key, _, _ := strings.Cut(ct.Field(i).Tag.Get("toml"), ",")
		if key == "" || key == "-" {
			continue
		}
		if ct.Field(i).Type.Kind() == reflect.Struct && ct.Field(i).Type != reflect.TypeFor[Duration]() {
			key = "[" + key + "]"
		}
		if !strings.Contains(err.Error(), key) {
			t.Errorf("the unknown-key message does not name %s: %v", key, err)
		}
	}
}
