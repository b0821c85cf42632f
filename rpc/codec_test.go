package rpc

import (
	"context"
	"net"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// rawCodec sends []byte as they are: how a test writes undecodable bytes.
type rawCodec struct{}

func (rawCodec) Marshal(v any) (mem.BufferSlice, error) {
	return mem.BufferSlice{mem.SliceBuffer(v.([]byte))}, nil
}
func (rawCodec) Unmarshal(data mem.BufferSlice, v any) error {
	*(v.(*[]byte)) = data.Materialize()
	return nil
}
func (rawCodec) Name() string { return "raw" }

// limiterStub answers every well-formed Allow, so a test sees whether the
// handler ran.
type limiterStub struct {
	pb.UnimplementedRateLimiterServer
	calls int
}

func (s *limiterStub) Allow(context.Context, *pb.AllowRequest) (*pb.AllowResponse, error) {
	s.calls++
	return &pb.AllowResponse{Allowed: true}, nil
}

func serveWithDecodeOptions(t *testing.T) (*grpc.ClientConn, *limiterStub) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gs := grpc.NewServer(decodeOptions()...)
	stub := &limiterStub{}
	pb.RegisterRateLimiterServer(gs, stub)
	healthpb.RegisterHealthServer(gs, health.NewServer())
	go func() { _ = gs.Serve(ln) }()
	t.Cleanup(gs.Stop)
	conn, err := grpc.NewClient(ln.Addr().String(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, stub
}

func field(num protowire.Number, typ protowire.Type, v []byte) []byte {
	return append(protowire.AppendTag(nil, num, typ), v...)
}

func TestUndecodableRequestIsInvalidArgumentNamingTheField(t *testing.T) {
	conn, stub := serveWithDecodeOptions(t)
	badUTF8 := protowire.AppendBytes(nil, []byte{0xff, 0xfe})
	limit := protowire.AppendBytes(nil, field(1, protowire.VarintType, []byte{0x80})) // truncated varint inside limit
	item := protowire.AppendBytes(nil, field(1, protowire.BytesType, badUTF8))        // requests[0].key
	for _, tc := range []struct {
		name, method string
		body         []byte
		field        string
	}{
		{"garbage", "/floodgate.v1.RateLimiter/Allow", []byte{0xff, 0xff, 0xff, 0xff}, "request:"},
		{"truncated length", "/floodgate.v1.RateLimiter/Allow", []byte{0x0a, 0x10, 'k'}, "key:"},
		{"key not UTF-8", "/floodgate.v1.RateLimiter/Allow", field(1, protowire.BytesType, badUTF8), "key:"},
		{"nested limit", "/floodgate.v1.RateLimiter/Allow", field(2, protowire.BytesType, limit), "limit"},
		{"batch item", "/floodgate.v1.RateLimiter/AllowBatch", field(1, protowire.BytesType, item), "requests[0].key:"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out []byte
			err := conn.Invoke(context.Background(), tc.method, tc.body, &out, grpc.ForceCodecV2(rawCodec{}))
			if status.Code(err) != codes.InvalidArgument {
				t.Fatalf("got %v, want InvalidArgument", err)
			}
			if msg := status.Convert(err).Message(); !strings.Contains(msg, tc.field) {
				t.Fatalf("message %q does not name %q", msg, tc.field)
			}
		})
	}
	if stub.calls != 0 {
		t.Fatalf("the handler ran %d times on undecodable requests", stub.calls)
	}
	// Well-formed requests still reach the handler, and nothing was left
	// behind for them to trip over.
	if _, err := pb.NewRateLimiterClient(conn).Allow(context.Background(), &pb.AllowRequest{Key: "k"}); err != nil {
		t.Fatal(err)
	}
	n := 0
	decodeErrors.Range(func(any, any) bool { n++; return true })
	if n != 0 || stub.calls != 1 {
		t.Fatalf("%d decode errors left over, %d calls", n, stub.calls)
	}
}

// A streamed message that cannot be decoded ends the stream with
// InvalidArgument too (health Watch is server-streaming).
func TestUndecodableStreamMessage(t *testing.T) {
	conn, _ := serveWithDecodeOptions(t)
	desc := &grpc.StreamDesc{ServerStreams: true}
	st, err := conn.NewStream(context.Background(), desc, "/grpc.health.v1.Health/Watch", grpc.ForceCodecV2(rawCodec{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := st.SendMsg([]byte{0xff, 0xff}); err != nil {
		t.Fatal(err)
	}
	_ = st.CloseSend()
	var out []byte
	if err := st.RecvMsg(&out); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("got %v, want InvalidArgument", err)
	}
}
