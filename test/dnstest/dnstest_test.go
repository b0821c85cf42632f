package dnstest

import (
	"context"
	"slices"
	"testing"
	"time"
)

func TestResolves(t *testing.T) {
	s, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	r := s.Resolver()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := r.LookupHost(ctx, "floodgate-headless"); err == nil {
		t.Fatal("an unknown name resolved")
	}
	s.Set("floodgate-headless", "127.0.0.2", "127.0.0.1")
	got, err := r.LookupHost(ctx, "floodgate-headless")
	slices.Sort(got)
	if err != nil || !slices.Equal(got, []string{"127.0.0.1", "127.0.0.2"}) {
		t.Fatalf("got %v, %v", got, err)
	}
	s.Set("floodgate-headless", "127.0.0.3")
	if got, err := r.LookupHost(ctx, "FLOODGATE-HEADLESS."); err != nil || !slices.Equal(got, []string{"127.0.0.3"}) {
		t.Fatalf("after a change: %v, %v", got, err)
	}
}
