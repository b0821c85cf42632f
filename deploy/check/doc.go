// Package check validates what floodgate ships for deployment, in its own
// module so the Kubernetes API types it needs stay out of floodgate's:
// every manifest of deploy/kubernetes decodes strictly into the official
// API types (an unknown or misspelt field fails, as a schema validator
// would) and holds together (service names, ports, probes, the pods'
// arguments as floodgate parses them); the Dockerfile's build steps run
// here and make static binaries that report the stamped version; the
// Prometheus alerting rules of deploy/prometheus load as Prometheus loads
// them, and each fires on its fault, after its for:, and on nothing else
// (Prometheus's own engine evaluates them over synthetic series).
package check
