package rpc

import (
	"context"
	"fmt"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/encoding/proto"
	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	protov2 "google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/types/dynamicpb"
)

// decodeOptions make a request that is not valid protobuf answer
// InvalidArgument naming the field, not Internal: bytes a client sent are
// bad input like any other. grpc-go turns every codec error into Internal,
// so the codec does not fail: it records why the message could not be
// decoded, and interceptors answer with that before any handler runs.
func decodeOptions() []grpc.ServerOption {
	return []grpc.ServerOption{
		grpc.ForceServerCodecV2(checkedCodec{encoding.GetCodecV2(proto.Name)}),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			if err := takeDecodeError(req); err != nil {
				return nil, err
			}
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return h(srv, checkedStream{ss})
		}),
	}
}

// decodeErrors holds, per request message (by pointer, so per call), why
// it could not be decoded, from the codec until an interceptor takes it.
var decodeErrors sync.Map

// takeDecodeError returns (and forgets) the decode error recorded for m.
func takeDecodeError(m any) error {
	if err, ok := decodeErrors.LoadAndDelete(m); ok {
		return err.(error)
	}
	return nil
}

// checkedCodec is the proto codec, except that a message it cannot decode
// is left empty with its error recorded in decodeErrors.
type checkedCodec struct{ encoding.CodecV2 }

// Unmarshal implements encoding.CodecV2.
func (c checkedCodec) Unmarshal(data mem.BufferSlice, v any) error {
	if m, ok := v.(protov2.Message); ok && data.Len() > maxFields {
		if err := checkFieldCount(m.ProtoReflect().Descriptor(), data.Materialize()); err != nil {
			decodeErrors.Store(v, toStatus(err))
			return nil
		}
	}
	err := c.CodecV2.Unmarshal(data, v)
	m, ok := v.(protov2.Message)
	if err == nil || !ok {
		return err
	}
	protov2.Reset(m)
	decodeErrors.Store(v, toStatus(decodeError(m.ProtoReflect().Descriptor(), data.Materialize(), err)))
	return nil
}

// checkedStream answers a streamed message that could not be decoded
// with its InvalidArgument error.
type checkedStream struct{ grpc.ServerStream }

// RecvMsg implements grpc.ServerStream.
func (s checkedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return takeDecodeError(m)
}

// decodeError describes why b is no valid md, naming the field at fault
// when one is ("requests[2].key: ...").
func decodeError(md protoreflect.MessageDescriptor, b []byte, err error) error {
	field := fieldAt(md, b, "")
	if field == "" {
		field = "request"
	}
	return fmt.Errorf("%w: %s: not a valid %s message: %v", ErrInvalid, field, md.FullName(), err)
}

// fieldAt finds the field of b (an encoded md) that fails to decode, as
// an API path (prefix, then "name", "name[i]" or "name.sub"); "" when the
// bytes cannot even be split into fields.
func fieldAt(md protoreflect.MessageDescriptor, b []byte, prefix string) string {
	seen := map[protowire.Number]int{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return ""
		}
		fd := md.Fields().ByNumber(num)
		m := protowire.ConsumeFieldValue(num, typ, b[n:])
		if fd == nil {
			if m < 0 {
				return ""
			}
			b = b[n+m:]
			continue // an unknown field is kept, never refused
		}
		name := prefix + string(fd.Name())
		if fd.IsList() {
			name = fmt.Sprintf("%s[%d]", name, seen[num])
			seen[num]++
		}
		if m < 0 {
			return name
		}
		value := b[n : n+m]
		one := append(protowire.AppendTag(nil, num, typ), value...)
		if protov2.Unmarshal(one, dynamicpb.NewMessage(md)) != nil {
			if fd.Message() != nil && typ == protowire.BytesType {
				inner, _ := protowire.ConsumeBytes(value)
				if sub := fieldAt(fd.Message(), inner, name+"."); sub != "" {
					return sub
				}
			}
			return name
		}
		b = b[n+m:]
	}
	return ""
}
