package rpc

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	protov2 "google.golang.org/protobuf/proto"

	pb "github.com/floodgate/floodgate/proto/floodgate/v1"
)

// A 16 MB AllowBatch of empty checks (two bytes each on the wire, a
// hundred decoded) is refused before it is decoded: decoded, one held
// 800 MB, before any credential was checked. The largest real requests
// still decode.
func TestAMessageOfTooManyFieldsIsRefusedUndecoded(t *testing.T) {
	codec := checkedCodec{encoding.GetCodecV2(proto.Name)}
	bomb := bytes.Repeat([]byte{0x0a, 0x00}, 8_000_000)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	req := &pb.AllowBatchRequest{}
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bomb)}, req); err != nil {
		t.Fatal(err)
	}
	runtime.ReadMemStats(&after)
	err := takeDecodeError(req)
	if status.Code(err) != codes.InvalidArgument || len(req.Requests) != 0 {
		t.Fatalf("8,000,000 empty checks: %v, %d decoded", err, len(req.Requests))
	}
	if grew := after.TotalAlloc - before.TotalAlloc; grew > 64<<20 {
		t.Errorf("refusing it allocated %d MB", grew>>20)
	}
	// A map of a million empty entries inside one check, too.
	one := &pb.AllowRequest{Key: "k"}
	b, _ := protov2.Marshal(one)
	entries := bytes.Repeat([]byte{0x2a, 0x00}, 1_000_000) // field 5: descriptors
	if err := checkFieldCount(one.ProtoReflect().Descriptor(), append(b, entries...)); err == nil {
		t.Error("a check with 1,000,000 descriptors: not refused")
	}

	// The largest batch the API takes: 1,000 checks of 32 descriptors.
	big := &pb.AllowBatchRequest{}
	for i := range 1000 {
		d := map[string]string{}
		for j := range 32 {
			d[fmt.Sprintf("d%d", j)] = fmt.Sprintf("v%d-%d", i, j)
		}
		big.Requests = append(big.Requests, &pb.AllowRequest{Policy: "api", Descriptors: d})
	}
	wire, err := protov2.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	got := &pb.AllowBatchRequest{}
	if err := codec.Unmarshal(mem.BufferSlice{mem.SliceBuffer(wire)}, got); err != nil {
		t.Fatal(err)
	}
	if err := takeDecodeError(got); err != nil || len(got.Requests) != 1000 {
		t.Fatalf("the largest batch (%d bytes): %v, %d decoded", len(wire), err, len(got.Requests))
	}
}
