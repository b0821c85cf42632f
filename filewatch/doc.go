// Package filewatch reloads files that changed on disk, by looking at
// their modification times, sizes and change times at an interval:
// certificates and token files are rotated in place (a Kubernetes
// Secret, a cert-manager renewal) where no signal reaches the process.
// tlsconf and authz watch their files with it.
package filewatch
