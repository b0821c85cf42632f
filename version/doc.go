// Package version says which build of floodgate is running, from the
// build information the Go toolchain embeds: the module version (a tag
// when built with go install …@vX.Y.Z), the VCS revision and time, and
// whether the tree had local changes.
package version
