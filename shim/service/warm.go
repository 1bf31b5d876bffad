package service

import (
	"bytes"
	"encoding/json"
	"reflect"

	specs "github.com/opencontainers/runtime-spec/specs-go"

	"github.com/gensee/gensee/shim/gate"
	"github.com/gensee/gensee/spec"
)

// warmCodecs builds encoding/json's per-type caches (struct fields,
// encoders) for the documents a task's Create, bind and exit path decode
// and encode, and pages in the code that does it, while the shim waits for
// containerd's first request after its start: a cold decode of a bundle's
// config.json costs about 1 ms on the 2-vCPU VMs, a warm one 0.1 ms. Each
// type goes through an encode and a decode of a skeleton (skeleton), so
// the caches of the types nested in it are built too. Nothing it builds is
// kept but the caches; a request that comes first builds what it needs
// itself, as without it.
func warmCodecs() {
	for _, v := range warmTypes {
		t := reflect.TypeOf(v).Elem()
		b, err := json.Marshal(skeleton(t, 0).Addr().Interface())
		if err != nil {
			continue
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber() // as spec.DecodeChecked
		_ = d.Decode(reflect.New(t).Interface())
	}
}

// warmTypes are the documents of a task's life, as typed nil pointers: the
// bundle spec (read and rewritten by Create), the signed catalog, the
// records (admission, events, manifest) and the gate helper's input and
// result.
var warmTypes = []any{
	(*specs.Spec)(nil), (*spec.Envelope)(nil), (*spec.Catalog)(nil),
	(*spec.Admission)(nil), (*spec.Event)(nil), (*spec.Manifest)(nil),
	(*gate.Input)(nil), (*gate.Result)(nil),
}

// skeletonDepth bounds skeleton's descent (recursive types).
const skeletonDepth = 8

// skeleton is a value of type t with every pointer set and every slice and
// map given one element, down to skeletonDepth: its encoding holds an
// object for each struct type t reaches (omitempty leaves out nil pointers
// and empty slices and maps, never these), so decoding it visits them all.
func skeleton(t reflect.Type, depth int) reflect.Value {
	v := reflect.New(t).Elem()
	if depth >= skeletonDepth {
		return v
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() {
				v.Field(i).Set(skeleton(f.Type, depth+1))
			}
		}
	case reflect.Pointer:
		p := reflect.New(t.Elem())
		p.Elem().Set(skeleton(t.Elem(), depth+1))
		v.Set(p)
	case reflect.Slice:
		v.Set(reflect.Append(reflect.MakeSlice(t, 0, 1), skeleton(t.Elem(), depth+1)))
	case reflect.Map:
		m := reflect.MakeMapWithSize(t, 1)
		m.SetMapIndex(reflect.Zero(t.Key()), skeleton(t.Elem(), depth+1))
		v.Set(m)
	}
	return v
}
