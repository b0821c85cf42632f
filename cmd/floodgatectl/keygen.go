package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"

	"github.com/spf13/cobra"
)

// keygenCmd prints a new gossip encryption key for --gossip-key, like
// consul keygen: 32 random bytes (AES-256), base64.
func keygenCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "keygen",
		Short: "Print a new gossip encryption key for floodgate --gossip-key",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			var k [32]byte
			if _, err := rand.Read(k[:]); err != nil {
				return err
			}
			key := base64.StdEncoding.EncodeToString(k[:])
			if g.json {
				return g.printResult(struct {
					Key string `json:"key"`
				}{key})
			}
			_, err := fmt.Fprintln(g.out, key)
			return err
		},
	}
}
