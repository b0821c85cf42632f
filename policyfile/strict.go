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

// Alias budget. An alias repeats the nodes of its anchor, so a small file
// of aliases of aliases (a "billion laughs") would decode to a number of
// nodes that grows with the square of its size, or faster: the nodes that
// aliases repeat are capped in proportion to the file's own, as yaml.v3's
// own decoder does (its alias ratio), with a floor for small files that
// reuse an anchor a lot.
const (
	aliasFloor  = 10_000
	aliasFactor = 20
)

// decodeStrict decodes n into v: structs of yaml-tagged fields, pointers
// to and slices of them, and scalars. A key v has no field for is an
// error; path names the place of n in the document. What aliases repeat is
// bounded (aliasFloor, aliasFactor).
func decodeStrict(n *yaml.Node, v reflect.Value, path string) error {
	d := strictDecoder{maxExpanded: aliasFloor + aliasFactor*countNodes(n)}
	return d.decode(n, v, path)
}

// strictDecoder is one decodeStrict: what aliases repeated, and the alias
// being expanded.
type strictDecoder struct {
	expanded, maxExpanded int // nodes aliases repeated, and may repeat
	// alias is the outermost alias being expanded (nil outside one), and
	// aliasPath its place: an alias bomb is reported where it goes off.
	alias     *yaml.Node
	aliasPath string
}

// decode decodes n into v, as decodeStrict says.
func (d *strictDecoder) decode(n *yaml.Node, v reflect.Value, path string) error {
	at := func(format string, args ...any) error {
		p := path
		if p == "" {
			p = "document"
		}
		return fmt.Errorf("%s: line %d: %s", p, n.Line, fmt.Sprintf(format, args...))
	}
	if d.alias != nil {
		if d.expanded++; d.expanded > d.maxExpanded {
			p := d.aliasPath
			if p == "" {
				p = "document"
			}
			return fmt.Errorf("%s: line %d: too many alias expansions (a YAML alias bomb?): the file's aliases repeat more than %d nodes",
				p, d.alias.Line, d.maxExpanded)
		}
	}
	switch n.Kind {
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil
		}
		return d.decode(n.Content[0], v, path)
	case yaml.AliasNode:
		if d.alias != nil {
			return d.decode(n.Alias, v, path)
		}
		d.alias, d.aliasPath = n, path
		err := d.decode(n.Alias, v, path)
		d.alias = nil
		return err
	}
	if n.Tag == "!!null" {
		return nil // absent: leave the zero value
	}
	for v.Kind() == reflect.Pointer {
		if v.IsNil() {
			v.Set(reflect.New(v.Type().Elem()))
		}
		v = v.Elem() // a node is counted once, pointer or not
	}
	switch v.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return at("want a mapping of %s, got %s", strings.Join(yamlKeys(v.Type()), ", "), describe(n))
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if k.Kind == yaml.AliasNode {
				// An alias's Value is its anchor's name, not the key it
				// stands for: *x, where &x names "api", is the key "api".
				line := k.Line
				k = &yaml.Node{Kind: k.Alias.Kind, Tag: k.Alias.Tag, Value: k.Alias.Value, Line: line}
			}
			if k.Kind != yaml.ScalarNode {
				n = k
				return at("want a field name (%s), got %s", strings.Join(yamlKeys(v.Type()), ", "), describe(k))
			}
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
			if err := d.decode(val, v.Field(idx), sub); err != nil {
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
			if err := d.decode(e, s.Index(i), fmt.Sprintf("%s[%d]", path, i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if n.Kind != yaml.ScalarNode {
		return at("want a single value, got %s", describe(n))
	}
	if k := v.Kind(); k >= reflect.Int && k <= reflect.Uint64 && legacyOctal(n.Value) {
		// yaml.v3 reads 010 as YAML 1.1 did, as octal 8 (while 08 and 09
		// are 8 and 9), and YAML 1.2 as 10: either may be what was meant,
		// and a limit is never taken other than as written.
		return at("want a decimal number, got %s: a leading 0 is octal to some YAML readers and decimal to others; write it without the leading 0 (0o17 is octal)", n.Value)
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

// legacyOctal reports whether a plain scalar is a number with a leading
// 0 before another digit ("010", "-0_7", "08.5"), the octal of YAML 1.1.
func legacyOctal(s string) bool {
	s = strings.ReplaceAll(strings.TrimLeft(s, "+-"), "_", "")
	return len(s) > 1 && s[0] == '0' && '0' <= s[1] && s[1] <= '9'
}

// countNodes counts the nodes of n's tree as the file spells them: an
// alias is one node, however many its anchor has.
func countNodes(n *yaml.Node) int {
	c := 1
	for _, e := range n.Content {
		c += countNodes(e)
	}
	return c
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
