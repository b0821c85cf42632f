package policyfile

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"strings"

	"go.yaml.in/yaml/v3"
)

// decodeStrict decodes n into v: structs of yaml-tagged fields, pointers
// to and slices of them, and scalars. A key v has no field for is an
// error; path names the place of n in the document.
func decodeStrict(n *yaml.Node, v reflect.Value, path string) error {
	at := func(format string, args ...any) error {
		p := path
		if p == "" {
			p = "document"
		}
		return fmt.Errorf("%s: line %d: %s", p, n.Line, fmt.Sprintf(format, args...))
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return decodeStrict(n.Content[0], v, path)
	case yaml.AliasNode:
		return decodeStrict(n.Alias, v, path)
	}
	if n.Tag == "!!null" {
		return nil // absent: leave the zero value
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		return decodeStrict(n, v.Elem(), path)
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return at("want a mapping of %s, got %s", strings.Join(yamlKeys(v.Type()), ", "), describe(n))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			idx := fieldIndex(v.Type(), k.Value)
			if idx < 0 {
				n = k
				return at("unknown field %q (known: %s)", k.Value, strings.Join(yamlKeys(v.Type()), ", "))
			}
			if seen[k.Value] {
				n = k
				return at("field %q given twice", k.Value)
			}
			seen[k.Value] = true
			sub := k.Value
			if path != "" {
				sub = path + "." + k.Value
			}
			if err := decodeStrict(val, v.Field(idx), sub); err != nil {
				return err
			}
		}
		return nil
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return at("want a list, got %s", describe(n))
		}
		s := reflect.MakeSlice(v.Type(), len(n.Content), len(n.Content))
		for i, e := range n.Content {
			if err := decodeStrict(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return at("want a single value, got %s", describe(n))
	}
	if k := v.Kind(); k >= reflect.Int && k <= reflect.Uint64 && n.ShortTag() == "!!float" {
		// yaml.v3 would cut 1.9 to 1: a limit of a person's intent is
		// never rounded silently (1e6 is whole, and stays 1000000).
		if f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64); err != nil || f != math.Trunc(f) {
			return at("want a whole number, got %s", n.Value)
		}
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		var te *yaml.TypeError
		if errors.As(err, &te) && len(te.Errors) > 0 {
			msg := te.Errors[0]
			if _, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(msg, "line ") {
				msg = rest
			}
			return at("%s", msg)
		}
		return at("%v", err)
	}
	return nil
}

// fieldIndex returns the index of the field of t named key in YAML, or -1.
func fieldIndex(t reflect.Type, key string) int {
	for i := range t.NumField() {
		if name, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); name == key {
			return i
		}
	}
	return -1
}

// yamlKeys lists the YAML names of t's fields.
func yamlKeys(t reflect.Type) []string {
	keys := make([]string, t.NumField())
	for i := range keys {
		keys[i], _, _ = strings.Cut(t.Field(i).Tag.Get("yaml"), ",")
	}
	return keys
}

func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	}
	return fmt.Sprintf("%q", n.Value)
}
