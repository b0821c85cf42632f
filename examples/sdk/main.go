package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:7700", "gRPC address of any floodgate node")
	listen := flag.String("listen", "127.0.0.1:8080", "address the example HTTP service listens on")
	flag.Parse()
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{*addr}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
	// A policy of its own, so the example runs on a fresh cluster: 3 a
	// minute per user.
	_, err = c.Admin().SetPolicies(ctx, &pb.SetPoliciesRequest{Policies: []*pb.Policy{{
		Name: "example", KeyBy: []string{"user"},
		Limits: []*pb.PolicyLimit{{Name: "per-minute", Limit: &pb.Limit{Algorithm: pb.Algorithm_SLIDING_LOG, Limit: 3, WindowMs: 60_000}}},
	}}})
	if err != nil {
		log.Fatal(err)
	}
	api := c.Policy("example")
	d, err := api.Allow(ctx, client.D{"user": "7"})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("user 7: allowed %v, %d of %d left, full again in %s\n", d.Allowed, d.Remaining, d.Limit, d.ResetAfter)

	limited := client.HTTPMiddleware(api, client.HTTPOptions{
		Descriptors: byUser,
		FailOpen:    true, // floodgate unreachable: serve anyway
	})
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") })
	srv := &http.Server{Addr: *listen, Handler: limited(hello), ReadHeaderTimeout: 5 * time.Second}
	log.Printf("serving on http://%s (curl -H 'X-User: 7' a few times)", *listen)
	log.Fatal(srv.ListenAndServe())
}

// byUser keys a request by its X-User header. A request without one is
// keyed by its address instead: an empty value is a value, and every
// caller without the header would otherwise share the key "user=", one
// of them spending the limit of all.
func byUser(r *http.Request) client.D {
	if u := r.Header.Get("X-User"); u != "" {
		return client.D{"user": u}
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	return client.D{"user": "addr:" + host}
}
