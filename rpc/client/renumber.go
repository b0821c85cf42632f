package client

import (
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// renumber returns err, a node's refusal of its part of a batch, with the
// item it names ("requests[j].…", j in the part the node was sent) named
// by its index in the caller's batch, idx[j]: the caller split its batch
// by leader, and an error naming requests[0] when the caller's requests[5]
// is at fault sends them looking at the wrong check. Other errors are
// returned as they are.
func renumber(err error, idx []int) error {
	msg, j, from, end, ok := namedItem(err, len(idx))
	if !ok || idx[j] == j {
		return err
	}
	return status.Error(codes.InvalidArgument, msg[:from]+strconv.Itoa(idx[j])+msg[from+end:])
}

// itemError returns the item j a refusal of a batch of n names, and its
// refusal as a call of its own would have had it ("requests[j]." dropped
// from the message); -1 and nil if err names no item of the batch.
func itemError(err error, n int) (int, error) {
	msg, j, from, end, ok := namedItem(err, n)
	if !ok {
		return -1, nil
	}
	rest := strings.TrimPrefix(msg[from+end+1:], ".")
	return j, status.Error(codes.InvalidArgument, msg[:from-len(itemList)]+rest)
}

// itemList is how a refusal of a batch names its item: requests[j].
const itemList = "requests["

// namedItem parses a refusal of a batch of n (InvalidArgument) naming its
// item j: msg[from:from+end] is j's digits in the message msg.
func namedItem(err error, n int) (msg string, j, from, end int, ok bool) {
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		return "", 0, 0, 0, false
	}
	msg = st.Message()
	at := strings.Index(msg, itemList)
	if at < 0 {
		return "", 0, 0, 0, false
	}
	from = at + len(itemList)
	end = strings.IndexByte(msg[from:], ']')
	if end < 0 {
		return "", 0, 0, 0, false
	}
	j, aerr := strconv.Atoi(msg[from : from+end])
	if aerr != nil || j < 0 || j >= n {
		return "", 0, 0, 0, false
	}
	return msg, j, from, end, true
}
