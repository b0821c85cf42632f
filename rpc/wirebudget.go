package rpc

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/reflect/protoreflect"
)

// A protobuf field can take two bytes on the wire and a hundred once
// decoded (an empty message in a repeated field, a map entry): a request
// of a few megabytes, or a few kilobytes gzipped, decoded in full before
// any handler or credential check sees it, held close to a gigabyte, and
// a handful of them ran a node out of memory. So a large message's fields
// are counted on the wire first, nested messages included, and one with
// more than any request of the API needs is refused undecoded.
//
// Every field, and every element of a packed list, takes a byte at least,
// so a message of at most maxFields bytes (a check, most batches) is
// never counted.
const maxFields = 500_000 // a peer's forward of 4,096 checks, or a batch of 1,000 with 32 descriptors each, holds under 200,000

// errTooManyFields refuses a message past maxFields.
var errTooManyFields = errors.New("too many fields")

// checkFieldCount reports a message of md's type in b that holds more than
// maxFields fields, counting those of nested messages and each element of
// a packed list. Malformed input is left to the decoder to report.
func checkFieldCount(md protoreflect.MessageDescriptor, b []byte) error {
	budget := maxFields
	if err := countFields(md, b, &budget); err != nil {
		return fmt.Errorf("%w: request: a %s of more than %d fields (%d bytes)", ErrInvalid, md.FullName(), maxFields, len(b))
	}
	return nil
}

func countFields(md protoreflect.MessageDescriptor, b []byte, budget *int) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		if *budget--; *budget < 0 {
			return errTooManyFields
		}
		if typ != protowire.BytesType {
			if n = protowire.ConsumeFieldValue(num, typ, b); n < 0 {
				return nil
			}
			b = b[n:]
			continue
		}
		v, n := protowire.ConsumeBytes(b)
		if n < 0 {
			return nil
		}
		b = b[n:]
		fd := md.Fields().ByNumber(num)
		switch {
		case fd == nil:
		case fd.Kind() == protoreflect.MessageKind:
			if err := countFields(fd.Message(), v, budget); err != nil {
				return err
			}
		case fd.IsList() && fd.Kind() != protoreflect.StringKind && fd.Kind() != protoreflect.BytesKind:
			// A packed list: an element per byte at most.
			if *budget -= len(v); *budget < 0 {
				return errTooManyFields
			}
		}
	}
	return nil
}
