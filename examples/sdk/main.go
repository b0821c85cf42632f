package main

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"time"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
	"github.com/floodgate/floodgate/rpc/client"
)

func main() {
	ctx := context.Background()
	c, err := client.New(ctx, client.Options{Addrs: []string{"127.0.0.1:7700"}})
	if err != nil {
		log.Fatal(err)
	}
	defer c.Close()
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
		Descriptors: func(r *http.Request) client.D { return client.D{"user": r.Header.Get("X-User")} },
		FailOpen:    true, // floodgate unreachable: serve anyway
	})
	hello := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { fmt.Fprintln(w, "hello") })
	srv := &http.Server{Addr: "127.0.0.1:8080", Handler: limited(hello), ReadHeaderTimeout: 5 * time.Second}
	log.Print("serving on http://127.0.0.1:8080")
	log.Fatal(srv.ListenAndServe())
}
