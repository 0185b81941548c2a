package client

import "github.com/seqbus/seqbus/bus"

// Counters returns the client socket's bus counters (datagrams, bytes,
// send and receive calls by batch size); zero when its Conn keeps none.
func (c *Client) Counters() bus.Counters {
	if cr, ok := c.uc.(bus.CounterReader); ok {
		return cr.Counters()
	}
	return bus.Counters{}
}
