// Package policyfile is the YAML form of named policies: what
// `floodgatectl policy set/apply/validate -f` and `floodgate --policies`
// read and `policy get` and `policy list -o yaml` print. It parses
// strictly (an unknown field is an error naming its path), validates with
// the rules the server applies, and plans the changes that make a
// cluster's policies those of a file.
package policyfile
