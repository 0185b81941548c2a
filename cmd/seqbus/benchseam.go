package main

import (
	"fmt"

	"github.com/seqbus/seqbus/client"
	"github.com/seqbus/seqbus/engine"
)

// checkLoadSize says whether the load client can send commands of size
// bytes: 0 (real 39-byte new orders) or an opaque command of
// CommandHeaderLen+1..client.MaxCommandLen bytes.
func checkLoadSize(size int) error {
	if size != 0 && (size <= engine.CommandHeaderLen || size > client.MaxCommandLen) {
		return fmt.Errorf("want 0 (real new orders) or %d..%d bytes, got %d", engine.CommandHeaderLen+1, client.MaxCommandLen, size)
	}
	return nil
}
