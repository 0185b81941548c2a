package node

import (
	"fmt"

	"github.com/seqbus/seqbus/transport"
)

// The node's sockets and send path are package transport's; these names
// stay for the node's configuration (Config.Network).
type (
	// Endpoint is one of a node's sockets (transport.Endpoint).
	Endpoint = transport.Endpoint
	// Network opens a node's endpoints (transport.Network).
	Network = transport.Network
	// UDPNetwork opens real UDP sockets (transport.UDPNetwork).
	UDPNetwork = transport.UDPNetwork
	// MemNetwork places a node on an in-memory network
	// (transport.MemNetwork).
	MemNetwork = transport.MemNetwork
)

// checkNetwork defaults and bounds DatagramBytes against the network and
// the multicast interface (transport.FitDatagram): the interface must
// exist and be up, and its MTU hold a datagram; the default shrinks to a
// smaller MTU, a size the operator set is refused.
func (c *Config) checkNetwork() error {
	b, err := transport.FitDatagram(c.Network, c.Interface, c.DatagramBytes)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.DatagramBytes = b
	return nil
}

// transportConfig is the transport's part of c.
func (c *Config) transportConfig() transport.Config {
	return transport.Config{Network: c.Network, Listen: c.Listen, Group: c.Group, MarketData: c.MarketData, Interface: c.Interface, TTL: c.TTL,
		Stream: c.Stream, Node: c.ID, DatagramBytes: c.DatagramBytes, Key: c.Key, Log: c.Log}
}
