package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/floodgate/floodgate/tlsconf"
)

// tlsCmd makes throwaway certificates for trying TLS on one machine, as
// consul tls does: not a PKI for production, where cert-manager or Vault
// issue them.
func tlsCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tls",
		Short: "Make certificates for trying TLS and mutual TLS locally",
	}
	var dir, hosts, clients string
	create := &cobra.Command{
		Use:   "create",
		Short: "Write a cluster CA, a node certificate, a client CA and client certificates to --dir",
		Long: "Write, in --dir:\n" +
			"  ca.crt                 the cluster CA (--peer-tls-ca)\n" +
			"  node.crt, node.key     a node certificate of the cluster CA for --hosts, good\n" +
			"                         for --tls-cert and --peer-tls-cert alike\n" +
			"  client-ca.crt          the client CA (--tls-client-ca)\n" +
			"  NAME.crt, NAME.key     a client certificate of the client CA for each of --clients\n" +
			"The CA keys are not kept: run it again for new certificates. For production,\n" +
			"issue certificates with your PKI (cert-manager, Vault).",
		Example: "  floodgatectl tls create --dir tls --hosts 127.0.0.1,localhost --clients ops,checkout",
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if err := os.MkdirAll(dir, 0o700); err != nil {
				return err
			}
			cluster, err := tlsconf.NewCA("floodgate-cluster")
			if err != nil {
				return err
			}
			clientCA, err := tlsconf.NewCA("floodgate-clients")
			if err != nil {
				return err
			}
			if _, err := cluster.WriteCA(dir, "ca"); err != nil {
				return err
			}
			if _, err := clientCA.WriteCA(dir, "client-ca"); err != nil {
				return err
			}
			hostList := split(hosts)
			if len(hostList) == 0 {
				return fmt.Errorf("--hosts: at least one host or IP the nodes are dialed at")
			}
			if _, _, err := cluster.Issue(dir, "node", hostList...); err != nil {
				return err
			}
			written := []string{"ca.crt", "client-ca.crt", "node.crt", "node.key"}
			for _, name := range split(clients) {
				if strings.ContainsAny(name, `/\`) || name == "node" || name == "ca" || name == "client-ca" {
					return fmt.Errorf("--clients: %q cannot name a certificate file", name)
				}
				if _, _, err := clientCA.Issue(dir, name); err != nil {
					return err
				}
				written = append(written, name+".crt", name+".key")
			}
			if g.json {
				return g.printResult(struct {
					Dir   string   `json:"dir"`
					Files []string `json:"files"`
				}{dir, written})
			}
			_, err = fmt.Fprintf(g.out, "wrote in %s: %s\n", dir, strings.Join(written, " "))
			return err
		},
	}
	create.Flags().StringVar(&dir, "dir", "tls", "directory to write the files to")
	create.Flags().StringVar(&hosts, "hosts", "127.0.0.1,localhost", "comma-separated hosts and IPs of the nodes (the certificate's names)")
	create.Flags().StringVar(&clients, "clients", "ops", "comma-separated names of client certificates to make (each is its common name)")
	cmd.AddCommand(create)
	return cmd
}

func split(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
