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
	st := status.Convert(err)
	if st.Code() != codes.InvalidArgument {
		return err
	}
	const list = "requests["
	msg := st.Message()
	at := strings.Index(msg, list)
	if at < 0 {
		return err
	}
	from := at + len(list)
	end := strings.IndexByte(msg[from:], ']')
	if end < 0 {
		return err
	}
	j, aerr := strconv.Atoi(msg[from : from+end])
	if aerr != nil || j < 0 || j >= len(idx) || idx[j] == j {
		return err
	}
	return status.Error(codes.InvalidArgument, msg[:from]+strconv.Itoa(idx[j])+msg[from+end:])
}
