package sent

import (
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Never reports whether a call failed with err before it had a
// connection to its server, given the peer that the call's grpc.Peer
// option filled in: gRPC fills it in once the call has a connection, and
// a call that had none was refused by the picker with Unavailable (no
// connection to the server could be made). Any other failure may have
// reached the server.
func Never(err error, p *peer.Peer) bool {
	return err != nil && p.Addr == nil && status.Code(err) == codes.Unavailable
}
