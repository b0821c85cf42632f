package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/floodgate/floodgate/authz"
	"github.com/floodgate/floodgate/cluster"
	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/tlsconf"
	"github.com/floodgate/floodgate/version"
)

// globals are the flags every command shares.
type globals struct {
	addr    string
	envAddr string // FLOODGATE_ADDR, to name it when --addr came from it
	json    bool
	timeout time.Duration
	tls     tlsconf.Files // CA verifies the node; Cert and Key are ours (mutual TLS)
	token   string        // file holding the bearer token
	out     io.Writer
}

func main() {
	g, root := newRootOf(os.Stdout)
	if err := root.Execute(); err != nil {
		msg := err.Error()
		if s, ok := status.FromError(err); ok {
			msg = fmt.Sprintf("%s: %s", s.Code(), s.Message())
		}
		if h := g.connHint(msg); h != "" {
			msg += " (" + h + ")"
		}
		fmt.Fprintln(os.Stderr, "floodgatectl:", msg)
		os.Exit(1)
	}
}

func newRoot(out io.Writer) *cobra.Command {
	_, root := newRootOf(out)
	return root
}

// newRootOf is newRoot with the globals its flags fill.
func newRootOf(out io.Writer) (*globals, *cobra.Command) {
	g := &globals{out: out}
	root := &cobra.Command{
		Use:           "floodgatectl",
		Short:         "Administer a floodgate cluster",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	g.envAddr = os.Getenv("FLOODGATE_ADDR")
	addr := g.envAddr
	if addr == "" {
		addr = "127.0.0.1:7700"
	}
	root.PersistentFlags().StringVar(&g.addr, "addr", addr, "gRPC address of any node (env FLOODGATE_ADDR)")
	root.PersistentFlags().BoolVar(&g.json, "json", false, "print JSON")
	root.PersistentFlags().DurationVar(&g.timeout, "timeout", 10*time.Second, "how long to wait for an answer")
	root.PersistentFlags().StringVar(&g.tls.CA, "cacert", os.Getenv("FLOODGATE_CACERT"), "PEM CA bundle verifying the node's certificate: TLS when set (env FLOODGATE_CACERT)")
	root.PersistentFlags().StringVar(&g.tls.Cert, "cert", os.Getenv("FLOODGATE_CERT"), "PEM client certificate, for nodes that require one (env FLOODGATE_CERT)")
	root.PersistentFlags().StringVar(&g.tls.Key, "key", os.Getenv("FLOODGATE_KEY"), "PEM private key of --cert (env FLOODGATE_KEY)")
	root.PersistentFlags().StringVar(&g.token, "token-file", os.Getenv("FLOODGATE_TOKEN_FILE"), "file holding the bearer token the node asks for, the admin token for changes (env FLOODGATE_TOKEN_FILE)")
	root.PersistentPreRunE = func(*cobra.Command, []string) error {
		if g.timeout <= 0 {
			return fmt.Errorf("--timeout: must be positive, got %s", g.timeout)
		}
		return nil
	}
	root.Version = version.Get().String()
	root.SetVersionTemplate("floodgatectl {{.Version}}\n")
	root.AddCommand(statusCmd(g), joinCmd(g), leaveCmd(g), allowCmd(g), policyCmd(g), resetCmd(g), versionCmd(g), keygenCmd(g), snapshotCmd(g), tlsCmd(g))
	return g, root
}

// versionCmd prints the build of floodgatectl (the same as --version).
func versionCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print floodgatectl's version, revision and Go version",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := version.Get()
			if g.json {
				return g.printResult(struct {
					Version  string `json:"version"`
					Revision string `json:"revision"`
					Time     string `json:"time"`
					Modified bool   `json:"modified"`
					Go       string `json:"go"`
				}{v.Version, v.Revision, v.Time, v.Modified, v.Go})
			}
			_, err := fmt.Fprintln(g.out, "floodgatectl", v)
			return err
		},
	}
}

// dial connects to --addr: with TLS when --cacert, --cert or --key is
// given, with the bearer token of --token-file when given.
// A malformed address is refused naming where it came from: gRPC's own
// errors ("name resolver error: produced zero addresses", "too many
// colons in address") named neither --addr nor FLOODGATE_ADDR.
func (g *globals) dial() (*grpc.ClientConn, error) {
	name := "--addr"
	if g.envAddr != "" && g.addr == g.envAddr {
		name = "FLOODGATE_ADDR"
	}
	if err := checkTarget(name, g.addr); err != nil {
		return nil, err
	}
	return g.dialAt(g.addr)
}

// dialAt connects to the node at addr with the same credentials as --addr.
// targetSchemes are the gRPC target schemes --addr may name beside
// host:port (dns:///host:port, unix:///path, ...): gRPC checks those.
var targetSchemes = []string{"dns:", "unix:", "unix-abstract:", "passthrough:", "ipv4:", "ipv6:"}

// checkTarget refuses a malformed host:port under the name it came by;
// an IPv6 host may carry a zone ([fe80::1%eth0]:7700).
func checkTarget(name, addr string) error {
	for _, s := range targetSchemes {
		if strings.HasPrefix(addr, s) {
			return nil
		}
	}
	if host, port, err := net.SplitHostPort(addr); err == nil {
		if ip, err := netip.ParseAddr(host); err == nil && ip.Zone() != "" {
			addr = net.JoinHostPort(ip.WithZone("").String(), port) // the zone is gRPC's to check
		}
	}
	if err := cluster.CheckAddr(name, addr); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), cluster.ErrConfig.Error()+": "))
	}
	return nil
}

func (g *globals) dialAt(addr string) (*grpc.ClientConn, error) {
	creds := insecure.NewCredentials()
	secure := g.tls.Enabled()
	if secure {
		if err := g.tls.Check([3]string{"cert", "key", "cacert"}); err != nil {
			return nil, err
		}
		r, err := tlsconf.NewReloader(g.tls)
		if err != nil {
			return nil, err
		}
		creds = r.ClientCredentials("")
	}
	opts := []grpc.DialOption{grpc.WithTransportCredentials(creds)}
	if g.token != "" {
		tok, err := authz.LoadToken("token-file", g.token)
		if err != nil {
			return nil, err
		}
		opts = append(opts, grpc.WithPerRPCCredentials(authz.Bearer(tok.Value, secure)))
	}
	return grpc.NewClient(addr, opts...)
}

func (g *globals) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), g.timeout)
}

// printJSON writes m as indented JSON, field names as in the proto.
func (g *globals) printJSON(m proto.Message) error {
	b, err := protojson.MarshalOptions{Multiline: true, Indent: "  ", UseProtoNames: true, EmitUnpopulated: true}.Marshal(m)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.out, string(b))
	return err
}

// printResult writes v, a result that is not a proto message, as
// indented JSON: its fields carry json tags in snake_case, as the protos'.
func (g *globals) printResult(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(g.out, string(b))
	return err
}

func admin(conn *grpc.ClientConn) pb.AdminClient { return pb.NewAdminClient(conn) }
