package tlsconf

import (
	"context"
	"errors"
	"net"

	"google.golang.org/grpc/credentials"
)

// ClientCredentials are gRPC transport credentials that take a fresh
// ClientConfig for every connection, so a reloaded certificate or CA
// applies to the next one. serverName is as in ClientConfig.
func (r *Reloader) ClientCredentials(serverName string) credentials.TransportCredentials {
	return &reloading{r: r, serverName: serverName}
}

type reloading struct {
	r          *Reloader
	serverName string
}

func (c *reloading) current() credentials.TransportCredentials {
	return credentials.NewTLS(c.r.ClientConfig(c.serverName))
}

func (c *reloading) ClientHandshake(ctx context.Context, authority string, conn net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return c.current().ClientHandshake(ctx, authority, conn)
}

func (c *reloading) ServerHandshake(net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, errors.New("tlsconf: client credentials cannot serve")
}

func (c *reloading) Info() credentials.ProtocolInfo { return c.current().Info() }

func (c *reloading) Clone() credentials.TransportCredentials {
	return &reloading{r: c.r, serverName: c.serverName}
}

// OverrideServerName is part of the interface grpc still defines.
func (c *reloading) OverrideServerName(name string) error {
	c.serverName = name
	return nil
}
