// Package backup is floodgate's backup file: a cluster's policies and
// every group's counters, as floodgatectl snapshot save writes them and
// snapshot restore reads them.
//
//	"FGBK" | version (1 byte)
//	records: kind (1 byte) | length (uvarint) | body
//	  kind 1: the policies (a floodgate.v1.ListPoliciesResponse)
//	  kind 2: one group's states (the shard snapshot format, package fsm)
//	kind 0 | CRC-32C of every byte before it (4 bytes, big endian)
//
// A reader refuses a file whose checksum, version or records are wrong,
// before anything is restored.
package backup
